package hub

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

// openRawSessions opens n 2025 sessions as a client that goes away without
// ending them would: an initialize, then nothing.
func openRawSessions(t *testing.T, url string, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequest("POST", url+"/operator/mcp", strings.NewReader(initBody))
		req.Header.Set("Authorization", "Bearer ci-token-123456")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatalf("initialize: %s", resp.Status)
		}
		req, _ = http.NewRequest("POST", url+"/operator/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		req.Header.Set("Authorization", "Bearer ci-token-123456")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The event stream, then the client goes away.
		tr := &http.Transport{}
		req, _ = http.NewRequest("GET", url+"/operator/mcp", nil)
		req.Header.Set("Authorization", "Bearer ci-token-123456")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err = tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
}

func (th *testHub) sessions() int {
	n := 0
	for range th.operator.server.Sessions() {
		n++
	}
	return n
}

// Issue 15, finding 6: 2025 sessions that clients left without ending
// them are closed once idle for SessionIdle, so thousands of them do not
// hold memory for the hub's life; until then a catalogue change that
// cannot reach them logs no warning per session. A session in use stays.
func TestIdleSessionsAreClosedQuietly(t *testing.T) {
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	// Long enough that opening the abandoned sessions on a loaded machine
	// does not outlast it.
	th := newTestHub(t, func(o *Options) { o.Logger = logger; o.SessionIdle = 3 * time.Second })
	live := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2025-11-25")
	const gone = 40
	openRawSessions(t, th.url, gone)
	if n := th.sessions(); n < gone {
		t.Fatalf("%d sessions open, want at least %d", n, gone)
	}

	// A catalogue change while they are open.
	th.operator.server.RemoveTools("echo")
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.Lines("calling notifications/tools/list_changed")) < gone {
		if time.Now().After(deadline) {
			t.Fatalf("the change was not tried on every session:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if warns := logs.Lines(`"level":"WARN"`); len(warns) > 0 {
		t.Fatalf("%d warnings for one catalogue change, first: %s", len(warns), warns[0])
	}

	// The abandoned sessions are closed; the one in use is kept.
	deadline = time.Now().Add(20 * time.Second)
	for th.sessions() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open 20 s after they were left", th.sessions())
		}
		if _, err := live.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("the session in use was closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := live.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("the session in use was closed: %v", err)
	}
}

// GET /debug/runtime tells an administrator the node's goroutines, heap
// and open operator sessions, to tell growth from load; nobody else.
func TestRuntimeRouteIsForAdministrators(t *testing.T) {
	th := newTestHub(t)
	hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2025-11-25")
	var row runtimeRow
	if code := getJSON(t, th.url+"/debug/runtime", "ada-token-123456", &row); code != http.StatusOK ||
		row.Goroutines == 0 || row.HeapAllocBytes == 0 || row.OperatorSessions != 1 {
		t.Fatalf("%d %+v", code, row)
	}
	if code := getJSON(t, th.url+"/debug/runtime", "ci-token-123456", &row); code != http.StatusForbidden {
		t.Fatalf("a token that is not an administrator's: %d", code)
	}
}
