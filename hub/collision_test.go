package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kitServer is a first-party server holding the echo tool, so a builtin
// name is there to collide with.
func kitServer() FirstParty {
	return FirstParty{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
		servers.Register(s, tr, nil, echoTool())
		return s
	}}
}

// CAT-12: a revision under which two tools would carry one name is refused
// at apply, naming both tools and their sources; the revision in force
// stays, and so do its tools. Reload answers the same refusal.
func TestCollisionRefusedAtApply(t *testing.T) {
	ext := hubtest.Upstream(t, &mcp.Tool{Name: "echo"}, &mcp.Tool{Name: "search"})
	docs := hubtest.Upstream(t, &mcp.Tool{Name: "search"})
	fixture := func(extPrefix, docsPrefix string) *hubtest.Company {
		return hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
			Server(fmt.Sprintf(`{name: ext, url: %q, tool_prefix: %q}`, ext, extPrefix)).
			Server(fmt.Sprintf(`{name: docs, url: %q, tool_prefix: %q}`, docs, docsPrefix))
	}
	next := fixture("ext_", "docs_").Parse(t)
	h, err := New(context.Background(), Options{Company: next, FirstParty: []FirstParty{kitServer()},
		Env:    hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup,
		Reload: func() (*config.Company, error) { return next, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	for _, name := range []string{"echo", "ext_echo", "ext_search", "docs_search"} {
		if _, ok := h.Catalogue().Get(name); !ok {
			t.Fatalf("%s not filed at start", name)
		}
	}

	for _, tc := range []struct {
		name       string
		rev        *config.Company
		tool, a, b string
	}{
		{"builtin", fixture("", "docs_").Parse(t), "echo", "builtin", "mcp:ext"},
		{"two servers", fixture("x_", "x_").Parse(t), "x_search", "mcp:ext", "mcp:docs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.Apply(tc.rev)
			var v config.Violations
			if !errors.As(err, &v) {
				t.Fatalf("apply: %v, want violations", err)
			}
			for _, want := range []string{fmt.Sprintf("%q", tc.tool), tc.a, tc.b} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not name %s", err, want)
				}
			}
			if h.Company().MCPServers[0].ToolPrefix != "ext_" {
				t.Fatal("the refused revision is in force")
			}
			if e, ok := h.Catalogue().Get("ext_echo"); !ok || e.Source != SourceMCP("ext") {
				t.Fatal("the tools in force moved")
			}
			// The same revision by reload: 422, naming the collision.
			next = tc.rev
			req, _ := http.NewRequest("POST", hubtest.Serve(t, h.Handler())+"/config/reload", nil)
			resp, err := hubtest.Client("ada-token-123456").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("reload of a colliding revision: %d", resp.StatusCode)
			}
		})
	}
}

// CAT-10, CAT-12: a seat's own child that lists a name the company
// catalogue holds is not filed for that seat, so it never shadows the
// company's tool; the refusal names both tools' sources and shows in the
// server's row of GET /mcp-servers.
func TestSeatToolNeverShadowsCompanyTool(t *testing.T) {
	url := hubtest.Upstream(t, &mcp.Tool{Name: "echo"}, &mcp.Tool{Name: "own"})
	c := hubtest.NewCompany().Person("ada", true).Agent("alice", `{perrole: {X-Seat: alice}}`).
		Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: perrole, shared: false, url: %q}`, url)).Parse(t)
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{kitServer()},
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	if e, ok := h.SeatRegistry("alice").Resolve("echo"); !ok || e.Source != SourceBuiltin {
		t.Fatalf("alice's echo resolves to %q (%v), want the company's builtin", e.Source, ok)
	}
	var body struct {
		Servers []serverRow `json:"servers"`
	}
	getJSON(t, hubtest.Serve(t, h.Handler())+"/mcp-servers", "ada-token-123456", &body)
	row := body.Servers[0]
	if row.State != rowFailing || !strings.Contains(row.Reason, `"echo"`) || !strings.Contains(row.Reason, "builtin") ||
		!strings.Contains(row.Reason, "mcp:perrole") || !strings.Contains(row.Reason, "alice") {
		t.Fatalf("row %+v, want Failing naming echo, builtin, mcp:perrole and the seat", row)
	}
}
