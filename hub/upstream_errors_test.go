package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// REF-6: a third-party server that answers a call with a protocol error of
// its own gets no class from the hub, and a person sees it as
// internal_error in the server's words, not as a condition to wait out.
func TestUpstreamProtocolErrorIsTheServersFailure(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "rpc-fail", Version: "0"}, nil)
	up.AddTool(&mcp.Tool{Name: "rpc_fail", Description: "fails", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the server does not like these arguments"}
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() {
		srv.Close()
		for ss := range up.Sessions() {
			ss.Close()
		}
	})
	doc := fmt.Sprintf(`units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: failing, url: %q}
`, srv.URL+"/")
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Options{Company: c,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h.Handler())
	t.Cleanup(func() { h.Close(); front.Close() })
	cs := hubtest.Connect(t, front.URL+"/operator/mcp", "ada-token-123456", "2026-07-28")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rpc_fail", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("a server's failure reached the client as a protocol error: %v", err)
	}
	class, _ := servers.ClassOf(res)
	if !res.IsError || class != authority.InternalError || !strings.Contains(textOf(res), "does not like these arguments") {
		t.Fatalf("isError %v class %q text %q", res.IsError, class, textOf(res))
	}
	// The router itself leaves it unclassed: only the person's surface
	// marks it.
	raw := h.Router().Call(context.Background(), CompanyRegistry(h.Catalogue()),
		authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "rpc_fail", nil)
	if _, classed := servers.ClassOf(raw); !raw.IsError || classed {
		t.Fatalf("router answer: isError %v classed %v", raw.IsError, classed)
	}
}
