package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteEcho serves a go-sdk server with one echo tool over HTTP on addr
// ("127.0.0.1:0" picks a port), as streamable HTTP or legacy SSE, and
// requires a header, so the test proves the instance sends it.
type remoteEcho struct {
	srv  *http.Server
	mcp  *mcp.Server
	addr string
	mu   sync.Mutex
	seen []string // X-Seat header values received
}

// newEchoServer is a go-sdk server with one tool, echo, answering its text.
func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: in.Text}, nil
		})
	return s
}

func startRemote(t testing.TB, addr string, sse bool) *remoteEcho {
	t.Helper()
	s := newEchoServer()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	if sse {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	}
	r := &remoteEcho{mcp: s}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("X-Seat"))
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *remoteEcho) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	r.srv.Close()
	// The HTTP server's shutdown leaves the MCP sessions it served open;
	// a server that went away ends them too.
	for ss := range r.mcp.Sessions() {
		ss.Close()
	}
}

// MCP-2: an SSE server, dialled with the configured headers.
func TestInstanceSSETransport(t *testing.T) {
	r := startRemote(t, "127.0.0.1:0", true)
	in, _ := startTest(t, Resolved{Name: "sse", Transport: TransportSSE, URL: "http://" + r.addr + "/", Headers: map[string]string{"X-Seat": "alice"}}, nil)
	waitState(t, in, StateRunning, 10*time.Second)
	if text, err := callText(t, in, "echo", `{"text":"over sse"}`); err != nil || text != "over sse" {
		t.Fatalf("echo over sse: %q %v", text, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.seen {
		if v != "alice" {
			t.Fatalf("a request went without the configured header: %q", r.seen)
		}
	}
}

// MCP-2, MCP-5, MCP-6: a remote server that goes away is noticed, calls are
// refused as it being down rather than as a transport error, and the
// instance reconnects when it is back on its address.
func TestInstanceHTTPReconnects(t *testing.T) {
	r := startRemote(t, "127.0.0.1:0", false)
	addr := r.addr
	in, logs := startTest(t, Resolved{Name: "remote", Transport: TransportHTTP, URL: "http://" + addr + "/"}, nil)
	waitState(t, in, StateRunning, 10*time.Second)
	if _, err := callText(t, in, "echo", `{"text":"one"}`); err != nil {
		t.Fatal(err)
	}
	r.stop()
	var down *DownError
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := callText(t, in, "echo", `{"text":"while down"}`)
		if err != nil {
			if !asDownError(err, &down) {
				t.Fatalf("call while the remote is gone: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls kept succeeding with the remote gone")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(strings.ToLower(down.Cause), "broken pipe") {
		t.Fatalf("cause %q", down.Cause)
	}
	startRemote(t, addr, false)
	deadline = time.Now().Add(15 * time.Second)
	for {
		if text, err := callText(t, in, "echo", `{"text":"back"}`); err == nil && text == "back" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected: %+v", in.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(logs.events("server_exited")) == 0 {
		t.Fatal("no server_exited for the lost remote")
	}
}

func asDownError(err error, target **DownError) bool {
	d, ok := err.(*DownError)
	if ok {
		*target = d
	}
	return ok
}

// OUT-1: a credential in a server's url never reaches a log line, a cause
// or a caller, though Go's HTTP errors quote the url they dialled.
func TestInstanceScrubsURLCredential(t *testing.T) {
	in, logs := startTest(t, Resolved{Name: "leaky", Transport: TransportHTTP, URL: "http://127.0.0.1:1/mcp?api_key=SUPERSECRET"}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for in.Status().State != StateDown {
		if time.Now().After(deadline) {
			t.Fatalf("state %+v", in.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := in.Call(context.Background(), "x", nil)
	logs.mu.Lock()
	all := logs.buf.String()
	logs.mu.Unlock()
	for what, text := range map[string]string{"cause": in.Status().Cause, "call": err.Error(), "log": all} {
		if strings.Contains(text, "SUPERSECRET") {
			t.Errorf("%s quotes the credential: %s", what, text)
		}
	}
	if !strings.Contains(in.Status().Cause, "the url of leaky") {
		t.Errorf("cause %q does not say which url", in.Status().Cause)
	}
}

// A remote whose handshake succeeds but whose tool listing fails is retried
// without leaving a session behind per attempt.
func TestInstanceFailedListingClosesSession(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "broken", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{}, nil
		})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, errors.New("backend down")
			}
			return next(ctx, method, req)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	in, logs := startTest(t, Resolved{Name: "broken", Transport: TransportHTTP, URL: "http://" + ln.Addr().String() + "/"}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.events("server_restart_failed")) < 5 {
		if time.Now().After(deadline) {
			t.Fatal("not retried")
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.Close()
	// Every failed listing closed its session, and Close closed the one of
	// an attempt in progress. Closing is a DELETE the remote has answered,
	// after dropping the session, by the time Close returns: none is left.
	open := 0
	for range s.Sessions() {
		open++
	}
	if open != 0 {
		t.Fatalf("%d sessions left open on the remote after %d failed listings", open, len(logs.events("server_restart_failed")))
	}
}
