package hubtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stuck is a third-party server whose tools never answer on their own, as
// a server hung on its own backend does: each call is reported on Started
// when it arrives, and ends only when its caller cancels it (reported on
// Cancelled) or the test ends.
type Stuck struct {
	// URL is the server's streamable HTTP endpoint.
	URL string
	// Started and Cancelled carry the tool name of each call.
	Started, Cancelled chan string
}

// StuckUpstream serves tools that block, over streamable HTTP on a loopback
// port, until the test ends.
func StuckUpstream(t testing.TB, tools ...*mcp.Tool) *Stuck {
	t.Helper()
	st := &Stuck{Started: make(chan string, 256), Cancelled: make(chan string, 256)}
	release := make(chan struct{})
	var calls sync.WaitGroup
	s := mcp.NewServer(&mcp.Implementation{Name: "hubtest-stuck", Version: "0"}, nil)
	for _, tool := range tools {
		if tool.InputSchema == nil {
			tool.InputSchema = map[string]any{"type": "object"}
		}
		name := tool.Name
		s.AddTool(tool, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			defer calls.Done()
			select {
			case st.Started <- name:
			default:
			}
			select {
			case <-ctx.Done():
				select {
				case st.Cancelled <- name:
				default:
				}
				return nil, ctx.Err()
			case <-release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
			}
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		close(release)
		calls.Wait()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	st.URL = srv.URL + "/"
	return st
}
