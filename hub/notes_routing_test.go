//lint:file-ignore SA1019 the test plays clients and servers of the session revisions, which still use logging.

package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 36 finding 3 (OUT-1): two callers of one shared server through
// /operator/mcp, on the fast path and the SDK's. The server writes a log
// line that names no request (a late line of an earlier caller's work)
// after both have called it, while one caller's call is the only one in
// flight: neither
// caller's client is shown it; the hub's log has server_note_unrouted
// with the server and the level, and not the line's text.
func TestStrayNoteReachesNeitherCaller(t *testing.T) {
	const line = "late line of ADMIN-SECRET-PROJECT"
	release, stop := make(chan struct{}, 1), make(chan struct{})
	s := mcp.NewServer(&mcp.Implementation{Name: "shared", Version: "0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
	})
	s.AddTool(&mcp.Tool{Name: "stray", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(context.Background(), &mcp.LoggingMessageParams{Level: "notice", Data: line}); err != nil {
				return nil, err
			}
			select {
			case <-release:
			case <-stop:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "quick", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "quick"}}}, nil
		})
	ev := logEvents{ch: make(chan slog.Record, 4096)}
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: shared, url: %q}`, hubtest.ServeMCP(t, s, nil))),
		func(o *Options) { o.Logger = slog.New(ev) })
	// A failed test ends the held call before the hub closes.
	t.Cleanup(func() { close(stop) })
	waitTool(t, th, "stray")
	connect := func(token string, saw *seen) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "caller", Version: "0"}, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				saw.add("log %v", req.Params.Data)
			},
		})
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: th.url + "/operator/mcp",
			HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: token}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	admin, bob := &seen{}, &seen{}
	adminSession := connect(adaTok, admin)
	bobSession := connect("ci-token-123456", bob)
	// Admin has used the server: from now on a line that names no call may
	// be a late one of admin's, whoever's call is in flight.
	if res, err := adminSession.CallTool(context.Background(), &mcp.CallToolParams{Name: "quick", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("admin's call: %v %v", res, err)
	}
	for _, fast := range []bool{true, false} {
		th.operator.noFast.Store(!fast)
		done := make(chan error, 1)
		go func() {
			res, err := bobSession.CallTool(context.Background(), &mcp.CallToolParams{Name: "stray", Arguments: map[string]any{}})
			if err == nil && res.IsError {
				err = fmt.Errorf("the call failed: %v", res.Content)
			}
			done <- err
		}()
		r := ev.await(t, 10*time.Second, "server_note_unrouted", "level=notice", "method=notifications/message")
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatalf("fast=%v: %v", fast, err)
		}
		r.Attrs(func(a slog.Attr) bool {
			if strings.Contains(a.Value.String(), "ADMIN-SECRET") {
				t.Errorf("fast=%v: the hub's log holds the line's text: %s", fast, a)
			}
			return true
		})
		var named bool
		r.Attrs(func(a slog.Attr) bool {
			named = named || (a.Key == "server" && a.Value.String() == "shared")
			return true
		})
		if !named {
			t.Errorf("fast=%v: server_note_unrouted does not name the server", fast)
		}
		for who, saw := range map[string]*seen{"admin": admin, "bob": bob} {
			if got := saw.take(); len(got) > 0 {
				t.Fatalf("fast=%v: %s's client was shown %q", fast, who, got)
			}
		}
	}
}
