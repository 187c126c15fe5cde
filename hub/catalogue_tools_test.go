package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CAT-13: list_mcp_server_tools is frozen in testdata/toolsnaps, keeps the
// rules every tool keeps, and is offered to seats as well as operators.
func TestCatalogueToolsSurface(t *testing.T) {
	d := catalogueDeps{Company: func() *config.Company { return nil },
		Offered: func(authority.Caller) Registry { return CompanyRegistry(NewCatalogue()) },
		States:  func() map[string]string { return nil }}
	c := serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return newCatalogueServer(d, tr, nil) })
	lt, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 1 || lt.Tools[0].Name != "list_mcp_server_tools" {
		t.Fatalf("listed %v", lt.Tools)
	}
	if lt.Tools[0].Meta[servers.MetaAudience] == servers.AudienceOperator {
		t.Error("list_mcp_server_tools is operator-only; a seat lists its own servers' tools too")
	}
	for _, v := range toolsnap.Rules(lt.Tools[0]) {
		t.Error(v)
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}

type listedServer struct {
	Server         string       `json:"server"`
	Source         string       `json:"source"`
	Shared         bool         `json:"shared"`
	Tools          []serverTool `json:"tools"`
	NoToolsBecause string       `json:"no_tools_because"`
}

func listedFrom(t *testing.T, res *mcp.CallToolResult) listedServer {
	t.Helper()
	if res.IsError {
		t.Fatalf("refused: %s", serverstest.Text(res))
	}
	var out listedServer
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// CAT-13: list_mcp_server_tools lists one MCP server's tools as the caller
// is offered them, in full — a description far past any page, every
// schema member, the hints — never cut or paged. A person over
// /operator/mcp reads the operator catalogue's, where a per-role server
// has none, and is told why; a seat reads its own child's; another seat
// reads none of them; a server the company does not declare is refused
// not_found, naming the ones it does.
func TestListMCPServerToolsInFull(t *testing.T) {
	long := strings.Repeat("Search the wiki for pages about a subject and rank them by how well they match. ", 800)
	wiki := hubtest.Upstream(t,
		&mcp.Tool{Name: "read_page", Description: "Read one page.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}}},
		&mcp.Tool{Name: "search", Description: long},
		&mcp.Tool{Name: "edit_page", Description: "Edit one page."})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Alice
        handle: alice
        mcp_env: {echo: {%s: stdio}}
      - {name: Bob, handle: bob}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: wiki, url: %q, tool_prefix: wiki_}
  - {name: echo, shared: false, command: %q}
`, benchEchoVar, wiki, exe)
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Options{Company: c, StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	cs := hubtest.Connect(t, hubtest.Serve(t, h.Handler())+"/operator/mcp", "ada-token-123456", "")
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_mcp_server_tools", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	for _, name := range []string{"wiki", "mcp:wiki"} {
		got := listedFrom(t, call(map[string]any{"server": name}))
		if got.Server != "wiki" || got.Source != "mcp:wiki" || !got.Shared || len(got.Tools) != 3 {
			t.Fatalf("%s: %+v", name, got)
		}
		by := map[string]serverTool{}
		for _, tool := range got.Tools {
			by[tool.Name] = tool
		}
		if by["wiki_search"].Description != long {
			t.Errorf("the long description came back %d bytes of %d", len(by["wiki_search"].Description), len(long))
		}
		if !strings.Contains(string(by["wiki_read_page"].InputSchema), `"id"`) || by["wiki_read_page"].Annotations.ReadOnly != servers.Yes {
			t.Errorf("read_page lost its schema or hints: %s %+v", by["wiki_read_page"].InputSchema, by["wiki_read_page"].Annotations)
		}
		if by["wiki_edit_page"].Delivers != "mcp:wiki" {
			t.Errorf("edit_page delivers %q", by["wiki_edit_page"].Delivers)
		}
	}

	perRole := listedFrom(t, call(map[string]any{"server": "echo"}))
	if perRole.Shared || len(perRole.Tools) != 0 || !strings.Contains(perRole.NoToolsBecause, "per-role") {
		t.Errorf("the operator's listing of a per-role server: %+v", perRole)
	}

	res := call(map[string]any{"server": "github"})
	if class, _ := servers.ClassOf(res); class != authority.NotFound {
		t.Fatalf("an unknown server: %s %s", class, serverstest.Text(res))
	}
	serverstest.MustContain(t, serverstest.Text(res), `"github"`, "wiki, echo")

	seat := func(handle string) listedServer {
		caller := authority.Caller{Seat: handle, Kind: authority.KindAgent, Requester: "ada", TurnKey: "t-" + handle}
		return listedFrom(t, h.Router().Call(context.Background(), h.SeatRegistry(handle), caller, "list_mcp_server_tools", []byte(`{"server":"echo"}`)))
	}
	if mine := seat("alice"); len(mine.Tools) != 1 || mine.Tools[0].Name != "echo" {
		t.Errorf("alice's own child: %+v", mine)
	}
	if theirs := seat("bob"); len(theirs.Tools) != 0 || theirs.NoToolsBecause == "" {
		t.Errorf("bob reads alice's child: %+v", theirs)
	}
}

// CAT-3: a company that declares no MCP server is not offered a tool that
// could only refuse.
func TestListMCPServerToolsOnlyWhereServersAreDeclared(t *testing.T) {
	c := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").Parse(t)
	h, err := New(context.Background(), Options{Company: c, Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if _, ok := h.Catalogue().Get("list_mcp_server_tools"); ok {
		t.Fatal("registered for a company with no MCP server")
	}
}
