package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CAT-9, MCP-12: a tool_annotations key naming no tool the server lists is
// reported in its row of GET /mcp-servers, and nothing else is.
func TestMCPServersReportsUnlistedAnnotations(t *testing.T) {
	url := hubtest.Upstream(t, &mcp.Tool{Name: "search"})
	c := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: docs, url: %q, tool_annotations: {search: {read_only: true}, serach: {read_only: true}, fetch: {open_world: true}}}`, url)).Parse(t)
	h, err := New(context.Background(), Options{Company: c, Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	base := hubtest.Serve(t, h.Handler())
	var body struct {
		Servers []serverRow `json:"servers"`
	}
	if code := getJSON(t, base+"/mcp-servers", "ada-token-123456", &body); code != http.StatusOK || len(body.Servers) != 1 {
		t.Fatalf("GET /mcp-servers: %d %+v", code, body)
	}
	row := body.Servers[0]
	if row.State != rowRunning || !slices.Equal(row.UnlistedAnnotations, []string{"fetch", "serach"}) {
		t.Fatalf("row %+v, want Running with unlisted [fetch serach]", row)
	}
}
