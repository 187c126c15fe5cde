package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call's answer arrives before its event stream has ended: the SDK's
// client drains the rest of the stream after handing the answer over, so
// the connection can carry the next call. The caller's context ends as
// soon as the call returns (the router's per-call timeout is cancelled
// then), and that must not cut the drain, or every such call costs a new
// TCP connection to the server, its dial and its accept on both sides.
func TestCallsOverHTTPKeepTheirConnection(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "session"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) {
			s := newEchoServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
				&mcp.StreamableHTTPOptions{Stateless: stateless})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var dialled atomic.Int64
			srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					dialled.Add(1)
				}
			}}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })

			in, _ := startTest(t, Resolved{Name: "remote", Transport: TransportHTTP, URL: "http://" + ln.Addr().String() + "/"}, nil)
			waitState(t, in, StateRunning, 10*time.Second)
			if _, err := callText(t, in, "echo", `{"text":"first"}`); err != nil {
				t.Fatal(err)
			}
			before := dialled.Load()
			const calls = 200
			for n := range calls {
				// callText cancels its context as it returns, as the
				// router does.
				if text, err := callText(t, in, "echo", `{"text":"again"}`); err != nil || text != "again" {
					t.Fatalf("call %d: %q %v", n, text, err)
				}
			}
			// One call at a time needs one kept connection; a few more may
			// be opened by the session's own stream and listing.
			if opened := dialled.Load() - before; opened > 3 {
				t.Fatalf("%d calls, made one at a time, opened %d new connections to the server", calls, opened)
			}
		})
	}
}

// The read of an answered stream is the instance's: a server that keeps
// the stream open after its answer has the call return at once, and the
// stream ended when the instance closes, well before drainBound. (That the
// read outlives the call is TestCallsOverHTTPKeepTheirConnection's: here
// the server may notice a cut only after the instance began closing.)
func TestAnsweredStreamLeftOpenEndsWithTheInstance(t *testing.T) {
	s := newEchoServer()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	held := make(chan struct{}, 1) // a call's stream is being held open
	ended := make(chan bool, 1)    // the client let go of it: after the instance began to close?
	var closing atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.Method != "tools/call" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			sdk.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"held\"}]}}\n\n", req.ID)
		w.(http.Flusher).Flush()
		held <- struct{}{}
		<-r.Context().Done()
		ended <- closing.Load()
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	in, _ := startTest(t, Resolved{Name: "remote", Transport: TransportHTTP, URL: srv.URL + "/"}, nil)
	waitState(t, in, StateRunning, 10*time.Second)
	if text, err := callText(t, in, "echo", `{"text":"x"}`); err != nil || text != "held" {
		t.Fatalf("call: %q %v", text, err)
	}
	<-held
	closing.Store(true)
	in.Close()
	select {
	case afterClose := <-ended:
		if !afterClose {
			t.Fatal("the answered stream was cut as the call returned; it is read to its end")
		}
	case <-time.After(drainBound / 2):
		t.Fatal("the instance closed and its answered stream was still being read")
	}
}
