package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// getJSON reads an operator route with a token.
func getJSON(t *testing.T, url, token string, into any) int {
	t.Helper()
	resp, err := hubtest.Client(token).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// CAT-8: an MCP tool delivers to its server (mcp:<server>) unless it is
// proven read-only, by its own hints or by tool_annotations; a server's
// delivers key names another surface. GET /tools shows it.
func TestMCPToolsDeliverToTheirServer(t *testing.T) {
	wiki := hubtest.Upstream(t,
		&mcp.Tool{Name: "read_page", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		&mcp.Tool{Name: "edit_page"},
		&mcp.Tool{Name: "lookup"})
	relay := hubtest.Upstream(t, &mcp.Tool{Name: "send"}, &mcp.Tool{Name: "peek", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	c := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: wiki, url: %q, tool_annotations: {lookup: {read_only: true}}}`, wiki)).
		Server(fmt.Sprintf(`{name: relay, url: %q, tool_prefix: relay_, delivers: chat}`, relay)).Parse(t)
	h, err := New(context.Background(), Options{Company: c, Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	base := hubtest.Serve(t, h.Handler())

	var body struct {
		Tools []toolRow `json:"tools"`
	}
	if code := getJSON(t, base+"/tools", "ada-token-123456", &body); code != http.StatusOK {
		t.Fatalf("GET /tools: %d", code)
	}
	got := map[string]string{}
	for _, row := range body.Tools {
		got[row.Name] = row.Delivers
	}
	want := map[string]string{
		"read_page":  "",         // read-only by its own hints
		"lookup":     "",         // read-only by tool_annotations
		"edit_page":  "mcp:wiki", // reaches whoever reads the wiki
		"relay_send": "chat",     // the server's delivers key
		"relay_peek": "",
	}
	for name, d := range want {
		if g, ok := got[name]; !ok || g != d {
			t.Errorf("%s delivers %q (listed %v), want %q", name, g, ok, d)
		}
	}
}
