package e2e_test

// Self-tests for the peer helpers in peers_test.go. They point the helpers at
// servers nobody on this project wrote (go-sdk's conformance everything-server
// and the npm reference server-everything), so when a hub e2e test fails we
// know the harness was sound and the hub is at fault.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// startGoEverythingServer runs go-sdk's everything-server on a free loopback
// port and returns its MCP URL (it serves at the root path). stateless picks
// the server's stateless streamable-HTTP mode, which is its default; sampling
// and elicitation scenarios need a session and so need stateless=false.
func startGoEverythingServer(t *testing.T, stateless bool) string {
	t.Helper()
	bin := buildEverythingServer(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startPeerProcess(t, nil, bin, "-http", addr, fmt.Sprintf("-stateless=%v", stateless))
	url := "http://" + addr + "/"
	waitHTTP(t, url, 15*time.Second)
	return url
}

// startNodeEverythingServer runs @modelcontextprotocol/server-everything in
// streamable HTTP mode (its CLI argument "streamableHttp"; the port comes from
// $PORT) and returns its MCP URL, which is /mcp.
func startNodeEverythingServer(t *testing.T) string {
	t.Helper()
	node := pinnedNode(t)
	entry := filepath.Join(npmInstalled(t), "@modelcontextprotocol", "server-everything", "dist", "index.js")
	port := freePort(t)
	startPeerProcess(t, nodeEnv(t, fmt.Sprintf("PORT=%d", port)), node, entry, "streamableHttp")
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	waitHTTP(t, url, 30*time.Second)
	return url
}

func TestSelftestConformanceScenarios(t *testing.T) {
	url := startGoEverythingServer(t, true)
	rep := runConformance(t, url, "server-initialize", "ping", "tools-list")
	rep.requirePassed(t, "server-initialize", "ping", "tools-list")
	if len(rep.Passed) != 3 || len(rep.Failed) != 0 {
		t.Errorf("want exactly the 3 requested scenarios, all passing; got passed=%v failed=%v", rep.Passed, rep.Failed)
	}
	// Each scenario's verdict must rest on real checks, not on an empty file.
	for _, s := range []string{"server-initialize", "ping", "tools-list"} {
		if !slices.Contains(rep.Passed[s], s) {
			t.Errorf("scenario %s: successful checks %v do not include the scenario's own check", s, rep.Passed[s])
		}
	}
}

// TestSelftestConformanceActiveSuite runs the suite's whole default set in one
// process, which exercises the other parsing path (scenario names recovered
// from the suite's output directories and log). The stateful server is used
// because the sampling and elicitation scenarios need a session.
func TestSelftestConformanceActiveSuite(t *testing.T) {
	url := startGoEverythingServer(t, false)
	rep := runConformance(t, url)
	if len(rep.Failed) != 0 {
		t.Errorf("go-sdk everything-server failed scenarios: %v", rep.Failed)
	}
	rep.requirePassed(t, "server-initialize", "tools-call-simple-text", "tools-call-sampling",
		"resources-read-text", "prompts-get-with-args", "dns-rebinding-protection")
	if len(rep.Passed) < 25 {
		t.Errorf("only %d scenarios ran; the pinned suite's active set has 30", len(rep.Passed))
	}
}

// TestSelftestConformanceDetectsFailure proves a failing scenario lands in
// Failed with the suite's reason: nothing listens on the port.
func TestSelftestConformanceDetectsFailure(t *testing.T) {
	url := fmt.Sprintf("http://127.0.0.1:%d/", freePort(t))
	rep := runConformance(t, url, "ping")
	fails, ok := rep.Failed["ping"]
	if !ok || len(rep.Passed) != 0 {
		t.Fatalf("ping against a closed port: want failed, got passed=%v failed=%v", rep.Passed, rep.Failed)
	}
	if !strings.Contains(strings.Join(fails, " "), "fetch failed") {
		t.Errorf("failure reason %q does not say the request failed", fails)
	}
}

func TestSelftestTSClientGoEverythingServer(t *testing.T) {
	url := startGoEverythingServer(t, true)
	out := runTSClient(t, url, "ignored-by-this-server", []tsCall{
		{Name: "test_simple_text"},
		{Name: "test_error_handling"},
		{Name: "no_such_tool", Arguments: map[string]any{"x": 1}},
	})

	if out.ServerInfo.Name != "mcp-conformance-test-server" {
		t.Errorf("serverInfo.name = %q", out.ServerInfo.Name)
	}
	if out.ProtocolVersion == "" {
		t.Error("no negotiated protocol version")
	}
	names := out.ToolNames()
	for _, want := range []string{"test_simple_text", "test_error_handling", "test_image_content", "json_schema_2020_12_tool"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s; got %v", want, names)
		}
	}
	// Tools come through verbatim, including 2020-12 schema keywords.
	if tool, _ := out.Tool("json_schema_2020_12_tool"); !strings.Contains(string(tool.InputSchema), `"$defs"`) {
		t.Errorf("json_schema_2020_12_tool inputSchema lost $defs: %s", tool.InputSchema)
	}

	if r := out.Results[0]; r.Threw() || r.IsError || r.Text() != "This is a simple text response for testing." {
		t.Errorf("test_simple_text: %s", r.Raw)
	}
	if r := out.Results[1]; r.Threw() || !r.IsError || !strings.Contains(r.Text(), "intentionally returns an error") {
		t.Errorf("test_error_handling should be a tool-level error result: %s", r.Raw)
	}
	if r := out.Results[2]; !r.Threw() || r.Kind != "jsonrpc" || r.Code != -32602 {
		t.Errorf("unknown tool should throw JSON-RPC -32602: %s", r.Raw)
	}
}

func TestSelftestTSClientNodeEverythingServer(t *testing.T) {
	url := startNodeEverythingServer(t)
	out := runTSClient(t, url, "ignored-by-this-server", []tsCall{
		{Name: "echo", Arguments: map[string]any{"message": "crewlet"}},
		{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 40}},
		{Name: "echo", Arguments: map[string]any{}},
	})

	if out.ServerInfo.Name != "mcp-servers/everything" {
		t.Errorf("serverInfo.name = %q", out.ServerInfo.Name)
	}
	names := out.ToolNames()
	for _, want := range []string{"echo", "get-sum", "get-tiny-image", "get-structured-content"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s; got %v", want, names)
		}
	}
	if tool, _ := out.Tool("echo"); tool.Annotations["readOnlyHint"] != true {
		t.Errorf("echo annotations not passed through: %s", tool.Raw)
	}
	if r := out.Results[0]; r.Threw() || r.Text() != "Echo: crewlet" {
		t.Errorf("echo: %s", r.Raw)
	}
	if r := out.Results[1]; r.Threw() || !strings.Contains(r.Text(), "42") {
		t.Errorf("get-sum 2+40: %s", r.Raw)
	}
	// This server reports bad arguments as an isError result, not a throw.
	if r := out.Results[2]; r.Threw() || !r.IsError || !strings.Contains(r.Text(), "message") {
		t.Errorf("echo without message should be an isError result naming the field: %s", r.Raw)
	}
}

// TestSelftestTSClientConnectError checks the connect-failure contract the
// hub's auth tests rely on: a 401 comes back as connectError with the status,
// and the bearer token is actually sent.
func TestSelftestTSClientConnectError(t *testing.T) {
	auth := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case auth <- r.Header.Get("Authorization"):
		default: // keep only the first request's header
		}
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
	}))
	defer srv.Close()

	out := runTSClientRaw(t, srv.URL+"/mcp", "s3cret", nil)
	if out.ConnectError == "" || out.Status != http.StatusUnauthorized {
		t.Errorf("want connectError with status 401, got %+v", out)
	}
	select {
	case got := <-auth:
		if got != "Bearer s3cret" {
			t.Errorf("Authorization header = %q, want the bearer token", got)
		}
	default:
		t.Error("the client never reached the server")
	}
}
