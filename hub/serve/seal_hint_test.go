package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
)

// MCP-11, CFG-2: a server held for an unset ${VAR} tells the person the
// command that seals it into this hub's own store. A hub started with
// --data-dir names it, as `config check --data-dir` does, so the value
// pasted lands where the hub reads it, not in ./.crewlet; and the sentence
// speaks of the hub, as everything else does.
func TestHeldServerNamesTheHubsDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hub-data")
	cfg := hubtest.NewCompany().Server(`{name: memory, command: /nonexistent/bin/mcp-memory, env: {MEMORY_FILE: "${MEMORY_FILE}"}}`).Write(t)
	noEnv := func(string) (string, bool) { return "", false }
	base, _, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: dir, LookupEnv: noEnv})
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	want := "`crewlet secrets set MEMORY_FILE --data-dir " + dir + "`"

	token, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hubtest.Client(strings.TrimSpace(string(token))).Get(base + "/mcp-servers")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp-servers: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var rows struct {
		Servers []struct{ Name, State, Reason string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil || len(rows.Servers) != 1 {
		t.Fatalf("GET /mcp-servers: %v %+v", err, rows)
	}
	reason := rows.Servers[0].Reason
	if rows.Servers[0].State != "Failing" || !strings.Contains(reason, want) {
		t.Fatalf("memory's row: want Failing, its reason naming %s; got %s: %s", want, rows.Servers[0].State, reason)
	}
	if strings.Contains(reason, "engine") || !strings.Contains(reason, "the hub's environment") {
		t.Fatalf("the reason speaks of the engine, not the hub: %s", reason)
	}

	var stdout, stderr bytes.Buffer
	CheckFile(&stdout, &stderr, cfg, dir, noEnv)
	if !strings.Contains(stdout.String()+stderr.String(), want) {
		t.Fatalf("config check --data-dir %s does not name %s:\n%s%s", dir, want, stdout.String(), stderr.String())
	}

	// `config import --data-dir` without --store-secrets names the same
	// store for the literal credential it lifted out.
	client := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(client, []byte(`{"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse", "headers": {"Authorization": "Bearer lin_api_literal"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := Import(&stdout, &stderr, client, false, false, dir); code != 0 ||
		!strings.Contains(stderr.String(), "(crewlet secrets set LINEAR_HEADER_AUTHORIZATION --data-dir "+dir+", value on stdin)") {
		t.Fatalf("config import --data-dir %s: exit %d, stderr:\n%s", dir, code, stderr.String())
	}
}

// CFG-2: a value a client asks its person for (a VS Code input) is told
// to be sealed with the command that names the store `config import
// --data-dir` was given, as a literal credential is, not ./.crewlet's.
func TestImportNamesTheDataDirForAnAskedValue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hub data")
	client := filepath.Join(t.TempDir(), "mcp.json")
	vscode := `{"inputs": [{"type": "promptString", "id": "perplexity-key", "password": true}],
		"servers": {"perplexity": {"type": "stdio", "command": "npx", "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}}}}`
	if err := os.WriteFile(client, []byte(vscode), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	want := `store it as PERPLEXITY_INPUT_PERPLEXITY_KEY (crewlet secrets set PERPLEXITY_INPUT_PERPLEXITY_KEY --data-dir '` + dir + `', value on stdin)`
	if code := Import(&stdout, &stderr, client, false, false, dir); code != 0 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("config import --data-dir %s: exit %d, want %q in stderr:\n%s", dir, code, want, stderr.String())
	}
	// The default store needs no flag.
	stderr.Reset()
	if code := Import(&stdout, &stderr, client, false, false, DefaultDataDir); code != 0 ||
		!strings.Contains(stderr.String(), "(crewlet secrets set PERPLEXITY_INPUT_PERPLEXITY_KEY, value on stdin)") {
		t.Fatalf("config import: exit %d, stderr:\n%s", code, stderr.String())
	}
}
