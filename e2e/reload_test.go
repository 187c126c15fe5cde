package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gavv/httpexpect/v2"
)

// Issue 15, finding 3: a company file that is empty (an editor still
// saving it) or whose only administrator credential was removed passes
// neither `crewlet config check` nor a reload, by POST /config/reload or
// SIGHUP: the reload is refused with a sentence, and the revision in force
// stays — the administrator's token still works, the MCP server still
// runs and still answers.
func TestReloadNeverLocksEveryoneOut(t *testing.T) {
	bin := buildEverythingServer(t)
	adminLine := `      - {id: ada, token: "${E2E_TOKEN}", seat: ada}` + "\n"
	good := fmt.Sprintf(`units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Bob, handle: bob, kind: human}
api:
  auth:
    tokens:
%s      - {id: bob, token: "${E2E_BOB}", seat: bob}
mcp_servers:
  - name: everything
    command: %q
    trust: auto
`, adminLine, bin)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, []string{"E2E_TOKEN=" + e2eToken, "E2E_BOB=e2e-bob-token-0002"}, "--config", cfg)
	e := httpexpect.Default(t, h.baseURL())
	stillServing := func(when string) {
		t.Helper()
		row := authed(e, "GET", "/mcp-servers").Expect().Status(http.StatusOK).JSON().Object().
			Value("servers").Array().Value(0).Object()
		if state := row.Value("state").String().Raw(); state != "Running" {
			t.Fatalf("%s: the server is %s", when, state)
		}
		cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if res := callTool(t, cs, "test_simple_text", map[string]any{}); res.IsError {
			t.Fatalf("%s: the server's tool failed", when)
		}
	}
	stillServing("at start")

	for name, doc := range map[string]string{
		"a 0-byte file":               "",
		"the admin's token removed":   strings.Replace(good, adminLine, "", 1),
		"a file cut before its creds": good[:strings.Index(good, "api:")],
	} {
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		// A file that declares no credential is a sound document (a hub
		// started on it generates one); only applying it over declared
		// credentials is refused.
		out, err := exec.Command(crewletBinary(t), "config", "check", cfg).CombinedOutput()
		if name != "a file cut before its creds" && (exitCode(err) == 0 || !strings.Contains(string(out), "problem")) {
			t.Fatalf("config check of %s: exit %d\n%s", name, exitCode(err), out)
		}
		refused := authed(e, "POST", "/config/reload").Expect().Status(http.StatusUnprocessableEntity).JSON().Object()
		refused.Value("class").IsEqual("invalid")
		if msg := refused.Value("error").String().Raw(); !strings.Contains(msg, "empty") && !strings.Contains(msg, "administrator") &&
			!strings.Contains(msg, "lock out") {
			t.Fatalf("reload of %s: %s", name, msg)
		}
		stillServing("after a refused reload of " + name)
	}

	// An editor saving the file as the hub is sent SIGHUP: the same.
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs(), "config_reload_failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no config_reload_failed after SIGHUP:\n%s", h.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stillServing("after SIGHUP with a 0-byte file")

	if err := os.WriteFile(cfg, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	authed(e, "POST", "/config/reload").Expect().Status(http.StatusOK)
}
