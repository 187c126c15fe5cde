package main

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/hub"
)

// Issue 40, item 9: the first things a person types get answers that say
// what to do. `--version` and `version` print the hub's version; a
// mistyped command is answered with the one meant; an unknown flag of
// serve is said with the command's name, then its usage, exit 2.
func TestCommandLineAnswersAPersonsFirstWords(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		if r := runCrewlet(t, "", nil, args...); r.code != 0 || r.stdout != "crewlet "+hub.Version+"\n" || r.stderr != "" {
			t.Errorf("crewlet %s: want exit 0 and %q on stdout; got %s", strings.Join(args, " "), "crewlet "+hub.Version, r)
		}
	}
	r := runCrewlet(t, "", nil, "serv")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "crewlet: unknown command \"serv\"; did you mean serve?\nusage: crewlet COMMAND") {
		t.Errorf("crewlet serv: %s", r)
	}
	r = runCrewlet(t, "", nil, "serve", "--bogus")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "crewlet serve: flag provided but not defined: -bogus\nusage: crewlet serve ") || r.stdout != "" {
		t.Errorf("crewlet serve --bogus: %s", r)
	}
}

// Issue 40, item 9: a tab in a company file's indentation is named with
// its line and column (the parser says only that a character "cannot
// start any token"), as is a bare ${VAR} in a {…} mapping (item 2), and
// `config check` counts in the singular for one.
func TestConfigCheckNamesATabAndCountsInTheSingular(t *testing.T) {
	cfg := writeCompany(t, "units:\n  - id: core\n    name: Core\n    roles:\n\t  - {name: Ada, handle: ada, kind: human, admin: true}\n")
	r := runCrewlet(t, "", nil, "config", "check", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "Line 5, column 1 is a tab: YAML indents with spaces only") {
		t.Errorf("config check of a tab-indented line: %s", r)
	}

	// A bare ${VAR} in a {…} mapping: the parser names the line before
	// and a missing '}'; the check names the line and the quotes.
	cfg = writeCompany(t, "providers:\n  local: {api: openai, base_url: http://127.0.0.1:11434/v1, api_key: ${LOCAL_API_KEY}}\nmodels:\n  default: {provider: local, model: m}\n")
	r = runCrewlet(t, "", nil, "config", "check", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, `Line 2 has a ${VAR} inside a {…} mapping without quotes: write it "${VAR}"`) {
		t.Errorf("config check of a bare ${VAR} in a flow mapping: %s", r)
	}

	cfg = writeCompany(t, `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
mcp_servers:
  - {name: ghost, command: /nonexistent/bin/mcp-ghost}
`)
	r = runCrewlet(t, "", nil, "config", "check", cfg)
	if r.code != 0 || !strings.HasPrefix(r.stdout, cfg+": ok (1 unit, 1 MCP server)\n") {
		t.Errorf("config check of one unit and one server: %s", r)
	}
}
