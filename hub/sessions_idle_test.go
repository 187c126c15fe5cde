package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openRawSessions opens n 2025 sessions as a client that goes away without
// ending them would: an initialize, then nothing.
func openRawSessions(t *testing.T, url string, n int) {
	t.Helper()
	for range n {
		status, id := initSession(t, url, "ci-token-123456")
		if id == "" {
			t.Fatalf("initialize: %d", status)
		}
		if status, body := sessionPOST(t, url, "ci-token-123456", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
			t.Fatalf("initialized: %d %s", status, body)
		}
		// The event stream, then the client goes away.
		tr := &http.Transport{}
		req, _ := http.NewRequest("GET", url+"/operator/mcp", nil)
		req.Header.Set("Authorization", "Bearer ci-token-123456")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := tr.RoundTrip(req)
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
	// Allocation counters only grow, so a load run can take differences.
	before := row
	if code := getJSON(t, th.url+"/debug/runtime?gc=1", "ada-token-123456", &row); code != http.StatusOK ||
		row.Mallocs <= before.Mallocs || row.TotalAllocBytes <= before.TotalAllocBytes ||
		row.GCCycles <= before.GCCycles || row.StackInuseBytes == 0 || row.HeapInuseBytes == 0 {
		t.Fatalf("after a collection asked for: %d %+v (before %+v)", code, row, before)
	}
	if code := getJSON(t, th.url+"/debug/runtime", "ci-token-123456", &row); code != http.StatusForbidden {
		t.Fatalf("a token that is not an administrator's: %d", code)
	}
}

// serverSession is the hub's side of a client's session.
func (th *testHub) serverSession(t *testing.T, id string) *mcp.ServerSession {
	t.Helper()
	for ss := range th.operator.server.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	t.Fatalf("no session %q on the hub", id)
	return nil
}

// waitClosed waits for the hub to close a session, up to a bound.
func waitClosed(t *testing.T, ss *mcp.ServerSession, within time.Duration, what string) {
	t.Helper()
	closed := make(chan struct{})
	go func() { _ = ss.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(within):
		t.Fatalf("%s: its session is still open %s on", what, within)
	}
}

// exitingClient is an HTTP client that can exit as a process does: its
// connections cut at once, nothing sent after, no DELETE.
type exitingClient struct {
	mu     sync.Mutex
	conns  []net.Conn
	exited bool
}

func (c *exitingClient) http(token string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.exited {
			return nil, errors.New("the client has exited")
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.conns = append(c.conns, conn)
		}
		return conn, err
	}}
	return &http.Client{Transport: hubtest.Bearer{Token: token, Base: tr}}
}

func (c *exitingClient) exit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exited = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Issue 29: a 2025 client that goes away without ending its session (the
// MCP Inspector, after each command) no longer leaves it open for
// SessionIdle. A session that sent nothing past its handshake, and one
// whose client's event stream ended with nothing since, are closed after
// SessionGrace; one whose client is still there is kept for SessionIdle.
func TestGoneClientsSessionsEndAfterTheGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	th := newTestHub(t, func(o *Options) { o.SessionIdle = time.Hour; o.SessionGrace = grace })
	endpoint := th.url + "/operator/mcp"
	dial := func(hc *http.Client, tr *mcp.StreamableClientTransport) *mcp.ClientSession {
		t.Helper()
		tr.Endpoint, tr.HTTPClient = endpoint, hc
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "grace-test", Version: "0"}, nil).
			Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	// In use: a call, its event stream open, then nothing for longer
	// than the grace.
	kept := dial(hubtest.Client("ada-token-123456"), &mcp.StreamableClientTransport{})
	if _, err := kept.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The handshake and nothing else, no event stream either.
	idle := dial(hubtest.Client("ada-token-123456"), &mcp.StreamableClientTransport{DisableStandaloneSSE: true})
	waitClosed(t, th.serverSession(t, idle.ID()), 20*time.Second, "a client that sent nothing past its handshake")
	// The session in use has stood idle longer than that one by now, and
	// is kept.
	if _, err := kept.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("the session in use was closed: %v", err)
	}

	// As the Inspector runs a command: its stream open, a call, then the
	// process exits.
	var inspector exitingClient
	cs := dial(inspector.http("ada-token-123456"), &mcp.StreamableClientTransport{MaxRetries: -1})
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	ss := th.serverSession(t, cs.ID())
	inspector.exit()
	waitClosed(t, ss, 20*time.Second, "a client that exited")
	if _, err := kept.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("the session in use was closed: %v", err)
	}
}

// An idle session holds no request's header once its requests are answered
// (issue 37: an idle session's memory). The SDK keeps a session's last
// message reachable for the session's life, and with it that POST's header
// map, about 1 KiB a session; the hub drops the header after the handlers.
func TestAnsweredRequestsLetGoOfTheirHeaders(t *testing.T) {
	th := newTestHub(t)
	var mu sync.Mutex
	var headers []weak.Pointer[byte]
	var methods []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// A map is a pointer to the runtime's map; a weak pointer to
			// it says whether anything still reaches the header.
			m := *(*unsafe.Pointer)(unsafe.Pointer(&r.Header))
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			_ = json.Unmarshal(body, &msg)
			mu.Lock()
			headers = append(headers, weak.Make((*byte)(m)))
			methods = append(methods, msg.Method)
			mu.Unlock()
		}
		th.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	cs := hubtest.Connect(t, rec.URL+"/operator/mcp", "ada-token-123456", "2025-11-25")
	// The answer to this call is written after its handlers return, so
	// the initialized notification before it has been handled too.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	mu.Lock()
	defer mu.Unlock()
	if len(methods) < 3 {
		t.Fatalf("POSTs seen: %v; want initialize, notifications/initialized, tools/list", methods)
	}
	for i, h := range headers {
		if h.Value() != nil {
			t.Errorf("the header of the session's %s POST is still held after it was answered", methods[i])
		}
	}
}
