package hub

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withServers runs testCompany with the given mcp_servers entries.
func withServers(t *testing.T, entries ...string) func(*Options) {
	doc := testCompany + "mcp_servers:\n"
	for _, e := range entries {
		doc += "  - " + e + "\n"
	}
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("%s\n%v", doc, err)
	}
	return func(o *Options) { o.Company = c }
}

// waitFor reads one name from ch, failing the test after within.
func waitFor(t *testing.T, ch <-chan string, want string, within time.Duration) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(within):
		t.Fatalf("no %q within %s", want, within)
	}
}

func refusalData(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, _ := res.StructuredContent.(map[string]any)
	data, _ := m["data"].(map[string]any)
	if data == nil {
		t.Fatalf("no refusal data: %s", hubtest.Text(res))
	}
	return data
}

// MCP-6, issue 15 finding 5: a call to a server that never answers is cut
// at its server's call_timeout_seconds, the server is told to cancel it,
// and the caller is told in the engine's words, marked as possibly having
// taken effect unless the tool is read-only.
func TestCallTimeoutCutsACallAStuckServerNeverAnswers(t *testing.T) {
	stuck := hubtest.StuckUpstream(t, &mcp.Tool{Name: "hang"}, &mcp.Tool{Name: "peek"})
	th := newTestHub(t, withServers(t, fmt.Sprintf(
		`{name: stuck, url: %q, call_timeout_seconds: 1, tool_annotations: {peek: {read_only: true}}}`, stuck.URL)))
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2025-11-25")

	start := time.Now()
	// The test's own bound, so a hub that never cuts the call fails here.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("the call was answered after %s, want just over 1 s", d)
	}
	class, _ := servers.ClassOf(res)
	data := refusalData(t, res)
	if !res.IsError || class != authority.Unavailable || !strings.Contains(hubtest.Text(res), `"stuck" did not answer in 1 s`) ||
		!strings.Contains(hubtest.Text(res), "may have taken effect") {
		t.Fatalf("class %q: %s", class, hubtest.Text(res))
	}
	if data["may_have_taken_effect"] != true || data["timeout_seconds"] != float64(1) || data["server"] != "stuck" {
		t.Fatalf("refusal data %v", data)
	}
	waitFor(t, stuck.Started, "hang", time.Second)
	waitFor(t, stuck.Cancelled, "hang", 5*time.Second)

	// A read-only tool changed nothing, whatever became of the call.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "peek", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hubtest.Text(res), "did not answer") || strings.Contains(hubtest.Text(res), "may have taken effect") ||
		refusalData(t, res)["may_have_taken_effect"] != nil || refusalData(t, res)["server"] != "stuck" {
		t.Fatalf("read-only: %s", hubtest.Text(res))
	}
}

// Issue 15 finding 5: a 2026-07-28 request is its whole exchange, so a
// client that hangs up has its call cancelled at the server, as a 2025
// session's notifications/cancelled would.
func TestStatelessClientThatHangsUpCancelsItsCallUpstream(t *testing.T) {
	stuck := hubtest.StuckUpstream(t, &mcp.Tool{Name: "hang"})
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: stuck, url: %q}`, stuck.URL)), func(o *Options) { o.Logger = logger })
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		done <- err
	}()
	waitFor(t, stuck.Started, "hang", 5*time.Second)
	cancel()
	<-done
	waitFor(t, stuck.Cancelled, "hang", 5*time.Second)
	// A caller hanging up is no warning: strangers can do it at will.
	deadline := time.Now().Add(5 * time.Second)
	for len(logs.Lines("tool_call_abandoned")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned call was not noted:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if warns := logs.Lines(`"level":"WARN"`, `"tool":"hang"`); len(warns) > 0 {
		t.Fatalf("a hang-up was logged as a warning: %s", warns[0])
	}
}

// Issue 15 finding 5: closing the hub does not wait on calls stuck on a
// server: they are cut, each caller told the hub is shutting down, and
// Close returns well within the node's shutdown bound.
func TestCloseCutsCallsStuckOnAServer(t *testing.T) {
	stuck := hubtest.StuckUpstream(t, &mcp.Tool{Name: "hang"})
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: stuck, url: %q}`, stuck.URL)))
	answers := make(chan string, 2)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", version)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
			if err != nil {
				answers <- version + ": " + err.Error()
				return
			}
			answers <- version + ": " + hubtest.Text(res)
		}()
		waitFor(t, stuck.Started, "hang", 5*time.Second)
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() { th.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(8 * time.Second):
		t.Fatal("Close still waits on calls stuck on a server after 8 s")
	}
	t.Logf("Close took %s", time.Since(start))
	for range 2 {
		select {
		case a := <-answers:
			if !strings.Contains(a, "was stopped because the hub is shutting down") {
				t.Errorf("a cut call was answered %q", a)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a caller got no answer after the hub closed")
		}
	}
}

// Issue 15 finding 13: a control character in a third-party tool's
// arguments is refused invalid before anything is sent, in the kit's
// words, instead of being forwarded and answered back as binary.
func TestControlCharacterInThirdPartyArgumentsIsRefusedBeforeSending(t *testing.T) {
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"}))))
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_up", Arguments: map[string]any{"path": map[string]any{"name": "a\x00b"}}})
	if err != nil {
		t.Fatal(err)
	}
	class, _ := servers.ClassOf(res)
	if !res.IsError || class != authority.Invalid || !strings.Contains(hubtest.Text(res), "path.name holds a control character (U+0000)") {
		t.Fatalf("class %q: %s", class, hubtest.Text(res))
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_up", Arguments: map[string]any{"text": "tab\there"}})
	if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), "echo_up") {
		t.Fatalf("clean arguments: %v %s", err, hubtest.Text(res))
	}
}
