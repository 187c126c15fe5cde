package upstream

import (
	"context"
	"net"
	"net/http"
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
			s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "0"}, nil)
			mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"},
				func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
					Text string `json:"text"`
				}) (*mcp.CallToolResult, textOut, error) {
					return nil, textOut{Text: in.Text}, nil
				})
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
