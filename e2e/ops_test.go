package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func authed(e *httpexpect.Expect, method, path string) *httpexpect.Request {
	return e.Request(method, path).WithHeader("Authorization", "Bearer "+e2eToken)
}

// OPS-7, MCP-12: the server rows and pages, the create-only PUT, and a
// catalogue change pushed to an open 2025-11-25 session (MCP-8).
func TestMCPServerRoutes(t *testing.T) {
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
    env: {API_TOKEN: "${E2E_API_TOKEN}", MODE: "literal-configured-value"}
  - name: ghost
    command: /nonexistent/bin/mcp-ghost
  - name: needs-secret
    command: %q
    env: {KEY: "${E2E_NEVER_SET}"}
`, bin, bin), "E2E_API_TOKEN=api-token-value-123")
	e := httpexpect.Default(t, h.baseURL())

	rows := authed(e, "GET", "/mcp-servers").Expect().Status(http.StatusOK).JSON().Object().Value("servers").Array()
	rows.Length().IsEqual(3)
	ev := rows.Value(0).Object()
	ev.Value("state").IsEqual("Running")
	ev.Value("launch").Object().Value("env").Object().IsEqual(map[string]any{
		"API_TOKEN": "${E2E_API_TOKEN}", "MODE": "(literal, 24 characters)"})
	ev.Value("nodes").Array().Value(0).Object().Value("tools").Number().Gt(5)
	ghost := rows.Value(1).Object()
	ghost.Value("state").IsEqual("Failing")
	ghost.Value("reason").String().Contains("mcp-ghost")
	missing := rows.Value(2).Object()
	missing.Value("state").IsEqual("Failing")
	missing.Value("reason").String().Contains("E2E_NEVER_SET").Contains("crewlet secrets set")

	page := authed(e, "GET", "/mcp-servers/ghost").Expect().Status(http.StatusOK).JSON().Object()
	page.Value("tools").Array().IsEmpty()
	page.Value("no_tools_because").String().Contains("mcp-ghost")
	authed(e, "GET", "/mcp-servers/everything").Expect().Status(http.StatusOK).JSON().Object().
		Value("tools").Array().NotEmpty()
	authed(e, "GET", "/mcp-servers/nope").Expect().Status(http.StatusNotFound)

	// An open legacy session hears about the new server's tools.
	changed := make(chan struct{}, 8)
	tr := &mcp.StreamableClientTransport{Endpoint: h.mcpURL(), HTTPClient: hubtest.Client(e2eToken)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// trust: auto, as the test's own server: a pinned one's tools are held
	// until approved, and that is pinning_test.go's business.
	body := fmt.Sprintf(`{"command": %q, "tool_prefix": "second_", "trust": "auto"}`, bin)
	authed(e, "PUT", "/config/mcp-servers/second").WithText(body).Expect().Status(http.StatusPreconditionRequired)
	authed(e, "PUT", "/config/mcp-servers/everything").WithHeader("If-None-Match", "*").WithText(body).
		Expect().Status(http.StatusPreconditionFailed).JSON().Object().Value("class").IsEqual("exists")
	bad := authed(e, "PUT", "/config/mcp-servers/broken").WithHeader("If-None-Match", "*").
		WithText(`{"transport": "http", "command": "x", "bogus": 1}`).Expect().Status(http.StatusBadRequest).JSON().Object()
	bad.Value("error").String().Contains("bogus")
	invalid := authed(e, "PUT", "/config/mcp-servers/broken").WithHeader("If-None-Match", "*").
		WithText(`{"transport": "http", "command": "x"}`).Expect().Status(http.StatusUnprocessableEntity).JSON().Object()
	invalid.Value("violations").Array().Length().IsEqual(2)
	e.PUT("/config/mcp-servers/second").WithHeader("Authorization", "Bearer wrong").Expect().Status(http.StatusUnauthorized)

	created := authed(e, "PUT", "/config/mcp-servers/second").WithHeader("If-None-Match", "*").WithText(body).
		Expect().Status(http.StatusCreated).JSON().Object()
	created.Value("server").Object().Value("name").IsEqual("second")
	cfg, _ := os.ReadFile(filepath.Join(filepath.Dir(h.configPath), filepath.Base(h.configPath)))
	if i, j := strings.Index(string(cfg), "needs-secret"), strings.Index(string(cfg), "name: second"); i < 0 || j < i {
		t.Fatalf("the new server is not after the existing ones:\n%s", cfg)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a server was added")
	}
	lt, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range lt.Tools {
		found = found || tool.Name == "second_test_simple_text"
	}
	if !found {
		t.Fatal("the new server's tools are not listed")
	}
}

// The admin-only routes refuse a token that is not an administrator's.
func TestMCPServerRoutesNeedAdmin(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	// The default token is the administrator's; an unknown one is 401.
	e := httpexpect.Default(t, h.baseURL())
	e.GET("/mcp-servers").WithHeader("Authorization", "Bearer "+h.token).Expect().Status(http.StatusOK)
	e.GET("/mcp-servers").Expect().Status(http.StatusUnauthorized)
	e.PUT("/config/mcp-servers/x").WithHeader("Authorization", "Bearer "+h.token).WithHeader("If-None-Match", "*").
		WithText(`{"command": "x"}`).Expect().Status(http.StatusConflict).JSON().Object().Value("error").String().Contains("--config")
}

// CFG-2, CFG-3, MCP-9: a server whose credential is missing fails naming it;
// `crewlet secrets set` and a reload start it; the sealed value never
// appears in a tool result (OUT-1). An apply retries a down server at once.
func TestSecretSetThenReloadStartsServer(t *testing.T) {
	modules := npmInstalled(t)
	bin := buildEverythingServer(t)
	port := freePort(t)
	startPeerProcess(t, nodeEnv(t, fmt.Sprintf("PORT=%d", port)), pinnedNode(t),
		filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	waitHTTP(t, url, 20*time.Second)
	okFile := filepath.Join(t.TempDir(), "ok")
	script := fmt.Sprintf(`if [ ! -f %q ]; then echo "not ready yet" >&2; exit 1; fi; exec %q`, okFile, bin)
	h := hubWithServers(t, fmt.Sprintf(`  - name: echoer
    url: %q
    headers: {Authorization: "Bearer ${E2E_SEALED}"}
  - name: flaky
    command: /bin/sh
    args: ["-c", %q]
`, url, script))
	e := httpexpect.Default(t, h.baseURL())
	rows := authed(e, "GET", "/mcp-servers").Expect().Status(http.StatusOK).JSON().Object().Value("servers").Array()
	rows.Value(0).Object().Value("reason").String().Contains("E2E_SEALED")
	rows.Value(1).Object().Value("state").IsEqual("Failing")

	set := exec.Command(crewletBinary(t), "secrets", "set", "E2E_SEALED", "--data-dir", h.dataDir)
	set.Stdin = strings.NewReader("sealed-secret-value-42\n")
	out, err := set.CombinedOutput()
	if err != nil || strings.Contains(string(out), "sealed-secret-value-42") {
		t.Fatalf("secrets set: %v %s", err, out)
	}
	if err := os.WriteFile(okFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	authed(e, "POST", "/config/reload").Expect().Status(http.StatusOK)

	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := authed(e, "GET", "/mcp-servers").Expect().JSON().Object().Value("servers").Array()
		if rows.Value(0).Object().Value("state").String().Raw() == "Running" && rows.Value(1).Object().Value("state").String().Raw() == "Running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not running after the reload: %v", rows.Raw())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The flaky server's schedule would have waited 15s; the apply retried
	// it at once.
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the down server came back only after %s", d)
	}
	res := callTool(t, cs, "echo", map[string]any{"message": "the key is sealed-secret-value-42"})
	if text := hubtest.Text(res); res.IsError || strings.Contains(text, "sealed-secret-value-42") || !strings.Contains(text, "[REDACTED]") {
		t.Fatalf("echo of a sealed value: %s", text)
	}
	for _, f := range []string{"secrets.key", "secrets.sealed"} {
		b, _ := os.ReadFile(filepath.Join(h.dataDir, f))
		if strings.Contains(string(b), "sealed-secret-value-42") {
			t.Fatalf("%s holds the value in the clear", f)
		}
	}
	if strings.Contains(h.logs(), "sealed-secret-value-42") {
		t.Fatal("the sealed value was logged")
	}
}
