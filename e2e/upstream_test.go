package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// companyWith writes a company file with the default seats, one operator
// token and the given mcp_servers block. Its servers are the test's own
// programs, so each is trusted as it lists itself (trust: auto), as a
// developer's own servers are: holding new tools for a person's approval
// is tested on its own (pinning_test.go).
func companyWith(t testing.TB, servers string) string {
	t.Helper()
	servers = trustedAuto(servers)
	doc := `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Helper, handle: helper}
api:
  auth:
    tokens:
      - {id: ada, token: "${E2E_TOKEN}", seat: ada}
mcp_servers:
` + servers
	path := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// trustedAuto adds trust: auto to every entry of an mcp_servers block
// that does not say its trust, block or flow style alike.
func trustedAuto(servers string) string {
	lines := strings.SplitAfter(servers, "\n")
	var b strings.Builder
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "  - {name:") && !strings.Contains(l, "trust:"):
			l = strings.Replace(l, "{name:", "{trust: auto, name:", 1)
		case strings.HasPrefix(l, "  - name:") && !entrySays(lines[i+1:], "trust:"):
			l += "    trust: auto\n"
		}
		b.WriteString(l)
	}
	return b.String()
}

// entrySays reports whether the rest of a block-style entry (the lines
// after its first) holds a key.
func entrySays(rest []string, key string) bool {
	for _, l := range rest {
		if !strings.HasPrefix(l, "    ") {
			return false
		}
		if strings.HasPrefix(strings.TrimSpace(l), key) {
			return true
		}
	}
	return false
}

const e2eToken = "e2e-operator-token-0001"

func hubWithServers(t testing.TB, servers string, env ...string) *hubProc {
	t.Helper()
	cfg := companyWith(t, servers)
	h := startHub(t, append([]string{"E2E_TOKEN=" + e2eToken}, env...), "--config", cfg)
	h.configPath = cfg
	return h
}

// childrenOf lists the direct children of pid.
func childrenOf(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// groupMembers lists the live processes of a process group.
func groupMembers(pgid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		// fields: state ppid pgrp ...
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Dir(f), "/proc/"), "/"))
			out = append(out, pid)
		}
	}
	return out
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// go-sdk's everything-server as a stdio child of the hub: its tools are
// filed as mcp:everything with hints read from what it sent (absent ones
// unknown, CAT-7), an override applied (CAT-9), a prefix applied (CAT-12),
// and a call goes through. A server whose command does not exist costs only
// its own tools (MCP-4).
func TestStdioUpstreamThroughHub(t *testing.T) {
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
    tool_prefix: ev_
    env: {WRITTEN_EMPTY: ""}
    tool_annotations:
      test_simple_text: {read_only: true, openWorldHint: false}
      no_such_tool: {read_only: true}
  - name: ghost
    command: /nonexistent/bin/mcp-ghost
`, bin))
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "ev_test_simple_text", map[string]any{})
	if res.IsError || !strings.Contains(hubtest.Text(res), "This is a simple text response for testing") {
		t.Fatalf("ev_test_simple_text: %+v", res)
	}
	if res := callTool(t, cs, "lookup_colleague", map[string]any{"query": "ada"}); res.IsError {
		t.Fatal("builtins lost to a failing server")
	}
	// REF-6: the server's own failure carries no class of its own; on a
	// person's surface it is answered as internal_error, in the server's
	// words, which the hub does not rewrite.
	res = callTool(t, cs, "ev_test_error_handling", map[string]any{})
	if _, m := refusalClass(res.StructuredContent, res.Meta); !res.IsError || m != "internal_error" ||
		hubtest.Text(res) != "this tool intentionally returns an error for testing" {
		t.Fatalf("a third-party failure: isError %v class %q: %q", res.IsError, m, hubtest.Text(res))
	}

	e := httpexpect.Default(t, h.baseURL())
	tools := e.GET("/tools").WithHeader("Authorization", "Bearer "+e2eToken).Expect().Status(http.StatusOK).JSON().Object()
	tools.Value("sources").Object().Value("mcp:everything").Number().Gt(5)
	tools.Value("sources").Object().NotContainsKey("mcp:ghost")
	rows := tools.Value("tools").Array()
	find := func(name string) *httpexpect.Object {
		return rows.Filter(func(_ int, v *httpexpect.Value) bool {
			return v.Object().Value("name").String().Raw() == name
		}).Value(0).Object()
	}
	simple := find("ev_test_simple_text")
	simple.Value("source").String().IsEqual("mcp:everything")
	// The server sent no annotations for this tool: what the override
	// does not state stays unknown.
	simple.Value("annotations").Object().IsEqual(map[string]any{
		"read_only": "yes", "destructive": "unknown", "idempotent": "unknown", "open_world": "no"})
	find("ev_test_error_handling").Value("annotations").Object().IsEqual(map[string]any{
		"read_only": "unknown", "destructive": "unknown", "idempotent": "unknown", "open_world": "unknown"})

	logHas(t, h.logs(), "mcp_server_failed", `"server":"ghost"`, "/nonexistent/bin/mcp-ghost")
	logHas(t, h.logs(), "tools_discovered", `"server":"everything"`, `"unlisted_annotations":["no_such_tool"]`)
	// ENV-2: a value written as an empty string is named.
	logHas(t, h.logs(), "empty_env_vars", `"server":"everything"`, `"keys":["WRITTEN_EMPTY"]`)
}

// MCP-5, MCP-6, MCP-7 and ENV-1 against the built hub: a child killed with
// SIGKILL is noticed, its tools stay listed and refuse unavailable naming the
// server and what took it down, it is restarted at once, and calls succeed
// again. The child's environment holds nothing planted in the hub's.
func TestKilledChildRefusesThenRecovers(t *testing.T) {
	bin := buildEverythingServer(t)
	marker := filepath.Join(t.TempDir(), "started-once")
	// The wrapper makes every restart after the first take two seconds, so
	// the window in which the server is down can be observed.
	script := fmt.Sprintf(`if [ -f %q ]; then sleep 2; fi; touch %q; exec %q`, marker, marker, bin)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: /bin/sh
    args: ["-c", %q]
    env: {DECLARED_SETTING: "on"}
`, script), "E2E_PLANTED_SECRET=must-not-leak")
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if res := callTool(t, cs, "test_simple_text", map[string]any{}); res.IsError {
		t.Fatalf("first call: %+v", res)
	}
	kids := childrenOf(h.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("hub children %v", kids)
	}
	child := kids[0]
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), "E2E_PLANTED_SECRET") || strings.Contains(string(environ), "E2E_TOKEN") || !strings.Contains(string(environ), "DECLARED_SETTING=on") {
		t.Fatalf("child environment: %q", environ)
	}
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The hub noticed the death; the restart it begins at once (the first
	// death) takes the wrapper's two seconds.
	waitLog(t, h, 10*time.Second, "server_exited", `"server":"everything"`, "killed by signal 9", `"up_seconds"`)
	res := callTool(t, cs, "test_simple_text", map[string]any{})
	text := hubtest.Text(res)
	if s, m := refusalClass(res.StructuredContent, res.Meta); !res.IsError || s != "unavailable" || m != "unavailable" ||
		!strings.Contains(text, `The MCP server "everything" is not running: its process was killed by signal 9`) ||
		!strings.Contains(text, "It is being restarted now") || strings.Contains(strings.ToLower(text), "broken pipe") {
		t.Fatalf("call while down: isError %v class %q/%q: %s", res.IsError, s, m, text)
	}
	waitLog(t, h, 15*time.Second, "server_restarted", `"server":"everything"`, `"down_seconds"`, `"was"`)
	if res := callTool(t, cs, "test_simple_text", map[string]any{}); res.IsError {
		t.Fatalf("a call after the restart: %s", hubtest.Text(res))
	}
}

// MCP-1: stopping the hub leaves nothing of a child's process tree behind,
// a grandchild it started included.
func TestStopLeavesNoGrandchild(t *testing.T) {
	bin := buildEverythingServer(t)
	script := fmt.Sprintf(`sleep 300 & exec %q`, bin)
	h := hubWithServers(t, fmt.Sprintf(`  - name: forking
    command: /bin/sh
    args: ["-c", %q]
`, script))
	kids := childrenOf(h.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("hub children %v", kids)
	}
	members := groupMembers(kids[0])
	if len(members) < 2 {
		t.Fatalf("child group %d has %v; the grandchild is missing", kids[0], members)
	}
	h.stop(t)
	deadline := time.Now().Add(5 * time.Second)
	for len(groupMembers(kids[0])) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left behind after stop: %v", groupMembers(kids[0]))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// npm's reference memory server (stdio, Node) through the hub.
func TestNpmMemoryServerThroughHub(t *testing.T) {
	modules := npmInstalled(t)
	node := pinnedNode(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: memory
    command: %q
    args: [%q]
    env: {MEMORY_FILE_PATH: %q}
    startup_timeout_seconds: 30
`, node, filepath.Join(modules, "@modelcontextprotocol/server-memory/dist/index.js"), filepath.Join(t.TempDir(), "memory.jsonl")))
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "crewlet", "entityType": "project", "observations": []any{"an MCP hub"}}}})
	if res.IsError {
		t.Fatalf("create_entities: %s", hubtest.Text(res))
	}
	res = callTool(t, cs, "read_graph", map[string]any{})
	if res.IsError || !strings.Contains(hubtest.Text(res), "an MCP hub") {
		t.Fatalf("read_graph: %s", hubtest.Text(res))
	}
}

// npm's server-everything over streamable HTTP, dialled by the hub.
func TestNpmEverythingOverHTTPThroughHub(t *testing.T) {
	modules := npmInstalled(t)
	port := freePort(t)
	startPeerProcess(t, nodeEnv(t, fmt.Sprintf("PORT=%d", port)), pinnedNode(t),
		filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	waitHTTP(t, url, 20*time.Second)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    url: %q
    headers: {X-Trace: "e2e", Authorization: "Bearer ${E2E_HEADER_SECRET}"}
`, url), "E2E_HEADER_SECRET=header-secret-from-env-77")
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "echo", map[string]any{"message": "through the hub"})
	if res.IsError || !strings.Contains(hubtest.Text(res), "Echo: through the hub") {
		t.Fatalf("echo: %s\nhub log:\n%s", hubtest.Text(res), h.logs())
	}
	// A credential the hub resolved for a server, here from its own
	// environment, never comes back in a result (OUT-1).
	res = callTool(t, cs, "echo", map[string]any{"message": "token header-secret-from-env-77"})
	if text := hubtest.Text(res); strings.Contains(text, "header-secret-from-env-77") || !strings.Contains(text, "[REDACTED]") {
		t.Fatalf("echo of a resolved credential: %s", text)
	}
	res = callTool(t, cs, "get-sum", map[string]any{"a": 2, "b": 40})
	if res.IsError || !strings.Contains(hubtest.Text(res), "42") {
		t.Fatalf("get-sum: %s", hubtest.Text(res))
	}
	// Hints read off the HTTP wire: what the server stated, and unknown
	// for what it left out.
	rows := httpexpect.Default(t, h.baseURL()).GET("/tools").WithHeader("Authorization", "Bearer "+e2eToken).
		Expect().Status(http.StatusOK).JSON().Object().Value("tools").Array()
	echo := rows.Filter(func(_ int, v *httpexpect.Value) bool { return v.Object().Value("name").String().Raw() == "echo" }).Value(0).Object()
	echo.Value("source").IsEqual("mcp:everything")
	echo.Value("annotations").Object().Value("read_only").IsEqual("yes")
}

// logHas finds a log line of the event msg holding every want.
func logHas(t testing.TB, logs, msg string, wants ...string) {
	t.Helper()
	if !hasLogLine(logs, msg, wants...) {
		t.Errorf("no %s log line with %q", msg, wants)
	}
}

func hasLogLine(logs, msg string, wants ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		all := true
		for _, w := range wants {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

// waitLog waits until the hub has logged the event msg with every want,
// and fails after d: the hub is another process, and its log is where it
// says what it noticed.
func waitLog(t testing.TB, h *hubProc, d time.Duration, msg string, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !hasLogLine(h.logs(), msg, wants...) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s log line with %q within %s; log:\n%s", msg, wants, d, h.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// go-sdk's everything-server over streamable HTTP (its default stateless
// mode), dialled by the hub: tools listed and called, resources read.
func TestGoSDKEverythingOverHTTPThroughHub(t *testing.T) {
	bin := buildEverythingServer(t)
	port := freePort(t)
	startPeerProcess(t, nil, bin, "-http", fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitHTTP(t, url, 20*time.Second)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    url: %q
`, url))
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "test_simple_text", map[string]any{})
	if res.IsError || !strings.Contains(hubtest.Text(res), "simple text response") {
		t.Fatalf("test_simple_text: %s", hubtest.Text(res))
	}
	rr, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: "test://static-text"})
	if err != nil || len(rr.Contents) == 0 || rr.Contents[0].Text == "" {
		t.Fatalf("read test://static-text through the hub: %+v %v", rr, err)
	}
	logHas(t, h.logs(), "server_handshake", `"server":"everything"`, `"discover_answered":true`)
}

// trustedAuto marks each entry the test did not mark, in either style,
// and leaves one that says its trust as it is.
func TestTrustedAutoMarksEveryEntry(t *testing.T) {
	in := "  - name: a\n    command: x\n  - {name: b, url: u}\n  - name: c\n    trust: pinned\n  - {name: d, trust: pinned}\n"
	want := "  - name: a\n    trust: auto\n    command: x\n  - {trust: auto, name: b, url: u}\n  - name: c\n    trust: pinned\n  - {name: d, trust: pinned}\n"
	if got := trustedAuto(in); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
