package serve

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noEnv is an environment that holds nothing.
func noEnv(string) (string, bool) { return "", false }

// Issue 29: the embedded company's seat has no model, so every mention of
// it ends not_run; serve says so as it starts, on the banner and in the
// log, naming the seat and the keys that would give it a model, and how to
// get a file to set them in. The endpoint line stays last.
func TestServeSaysWhichSeatHasNoModel(t *testing.T) {
	logs := &syncBuffer{}
	_, out, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: noEnv,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	note := ""
	for _, l := range lines {
		if strings.Contains(l, "@assistant") {
			note = l
		}
	}
	for _, want := range []string{"has no model", "not_run", "models.default", "providers", "units[0].roles[1].model",
		"crewlet config default > company.yaml", "--config company.yaml"} {
		if !strings.Contains(note, want) {
			t.Fatalf("the banner's note on @assistant lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "MCP endpoint:") {
		t.Fatalf("the endpoint is not the banner's last line:\n%s", out)
	}
	if !strings.Contains(logs.String(), `"msg":"seat_has_no_model","seat":"assistant","set":"models.default or units[0].roles[1].model"`) {
		t.Fatalf("no seat_has_no_model record in the log:\n%s", logs)
	}
}

// Issue 29: in a company file, only the agent seats with no model are
// named, each by its own role's key and the file; a seat whose role names
// a model, and a person, are not.
func TestServeNamesOnlyTheSeatsWithoutAModel(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "acme.yaml")
	doc := `
providers:
  local: {api: openai, base_url: "http://127.0.0.1:9/v1"}
units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Writer, handle: writer, model: local/m1}
      - {name: Idle, handle: idle}
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: t.TempDir(), LookupEnv: noEnv})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	banner := out.String()
	if strings.Contains(banner, "@writer") || strings.Contains(banner, "@ada") ||
		strings.Count(banner, "has no model") != 1 {
		t.Fatalf("the banner names a seat that has a model, or a person:\n%s", banner)
	}
	if !strings.Contains(banner, "seat @idle has no model") || !strings.Contains(banner, "units[0].roles[2].model in "+cfg) {
		t.Fatalf("the banner does not say what @idle lacks and where to set it:\n%s", banner)
	}

	// Given models.default, no seat lacks one, and the banner says nothing.
	if err := os.WriteFile(cfg, []byte(doc+"models:\n  default: {provider: local, model: m2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, stop = runUntilListening(t, Options{ConfigFile: cfg, DataDir: t.TempDir(), LookupEnv: noEnv})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "has no model") {
		t.Fatalf("a seat with models.default is said to have none:\n%s", out)
	}
}
