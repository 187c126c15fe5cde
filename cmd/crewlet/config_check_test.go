package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeCompany(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 29: `config check` passed a server's ${VAR} that neither the secret
// store nor the environment held, and `serve` then ran the server Failing
// (CFG-3). The check fails on it, naming the variable and the command that
// stores it; the same file passes once the variable is sealed in the data
// directory the check is pointed at, or set in the environment.
func TestConfigCheckNamesAnUnsetVariableAndHowToStoreIt(t *testing.T) {
	cfg := writeCompany(t, `mcp_servers:
  - name: github
    command: github-mcp
    env: {GITHUB_TOKEN: "${GH_TOKEN}"}
`)
	data := filepath.Join(t.TempDir(), "data")

	r := runCrewlet(t, "", nil, "config", "check", "--data-dir", data, cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "${GH_TOKEN}") || !strings.Contains(r.stderr, "crewlet secrets set GH_TOKEN --data-dir "+data) {
		t.Fatalf("config check with ${GH_TOKEN} unset: want exit 1 naming it and `crewlet secrets set GH_TOKEN --data-dir %s`; got %s", data, r)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("config check made the data directory it was only to read: %v", err)
	}

	if r := runCrewlet(t, "", []string{"GH_TOKEN=from-the-environment"}, "config", "check", "--data-dir", data, cfg); r.code != 0 {
		t.Fatalf("config check with GH_TOKEN in the environment: %s", r)
	}

	if r := runCrewlet(t, "sealed-value\n", nil, "secrets", "set", "GH_TOKEN", "--data-dir", data); r.code != 0 {
		t.Fatalf("secrets set: %s", r)
	}
	r = runCrewlet(t, "", nil, "config", "check", "--data-dir", data, cfg)
	if r.code != 0 || !strings.HasPrefix(r.stdout, cfg+": ok") || strings.Contains(r.stdout+r.stderr, "sealed-value") {
		t.Fatalf("config check with GH_TOKEN sealed in the store: %s", r)
	}
}

// Issue 29: an unknown key read "field mcp_serverz not found in type
// config.Company". It names the key and the one meant.
func TestConfigCheckSuggestsTheNearestKey(t *testing.T) {
	cfg := writeCompany(t, "mcp_serverz:\n  - {name: github, command: github-mcp}\n")
	r := runCrewlet(t, "", nil, "config", "check", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "mcp_serverz") || !strings.Contains(r.stderr, "did you mean mcp_servers?") ||
		strings.Contains(r.stderr, "config.Company") {
		t.Fatalf("config check of mcp_serverz: %s", r)
	}
}

// What stops `serve` before it starts stops `config check` too, with the
// same words: a check that passed a file the hub then refuses would be
// worse than none.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, says string }{
		{"an operator token not set", `units:
  - id: core
    name: Core
    roles: [{name: Ada, handle: ada, kind: human, admin: true}]
api:
  auth:
    tokens: [{id: ada, token: "${ADA_TOKEN_FOR_THIS_TEST}", seat: ada}]
`, "ADA_TOKEN_FOR_THIS_TEST"},
		{"a certificate that is not there", "company: {name: Acme}\napi:\n  tls: {cert_file: nowhere.pem, key_file: nowhere-key.pem}\n", "nowhere.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeCompany(t, tc.doc)
			data := filepath.Join(t.TempDir(), "data")
			serve := runCrewlet(t, "", nil, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg)
			if serve.code == 0 || !strings.Contains(serve.stderr, tc.says) {
				t.Fatalf("serve: want a refusal naming %s; got %s", tc.says, serve)
			}
			check := runCrewlet(t, "", nil, "config", "check", cfg)
			if check.code != 1 || !strings.Contains(check.stderr, tc.says) {
				t.Fatalf("config check: want exit 1 naming %s, as serve does; got %s", tc.says, check)
			}
		})
	}
}

// Issue 38: `config check` names each wrong value of the sandbox block
// with its field, and says the box a hub started here would run coding
// runs in — or, on a machine without bwrap, that run_sandbox would be
// omitted and why.
func TestConfigCheckSaysTheSandbox(t *testing.T) {
	bad := writeCompany(t, "sandbox:\n  network: loopback\n  limits: {wall: soon, processes: 2}\n")
	r := runCrewlet(t, "", nil, "config", "check", bad)
	for _, want := range []string{`sandbox.network: "loopback" is neither none`, `sandbox.limits.wall: "soon" is not a duration`,
		"sandbox.limits.processes: 2 is below 8"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("config check of a wrong sandbox block: want exit 1 saying %q; got %s", want, r)
		}
	}

	good := writeCompany(t, "sandbox:\n  limits: {wall: 10m, memory_mb: 1024}\n")
	r = runCrewlet(t, "", nil, "config", "check", good)
	if r.code != 0 || !strings.Contains(r.stdout, "sandbox: bubblewrap (/usr/bin/bwrap), network none, agent builtin; each command within 10m0s, 600 CPU seconds, 1024 MiB of memory") {
		t.Fatalf("config check on a machine with bwrap: %s", r)
	}

	r = runCrewlet(t, "", []string{"PATH=" + t.TempDir()}, "config", "check", good)
	if r.code != 0 || !strings.Contains(r.stdout, "  no sandbox: bwrap (Debian's bubblewrap package) is not installed on this node, so coding runs (run_sandbox) are not offered") {
		t.Fatalf("config check on a machine without bwrap: %s", r)
	}
}
