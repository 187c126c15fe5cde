package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// list_mcp_server_tools (CAT-13) reads one MCP server's part of the
// catalogue the caller is offered: a seat's registry for a seat, the
// operator catalogue for everybody else. Like the catalogue itself it is
// answered whole — every tool, every description and schema as its
// server listed them — and never paged or cut (OUT-2): a listing that
// hid a tool would read as a server that does not have it.

// catalogueDeps is what the catalogue's tools read on every call.
type catalogueDeps struct {
	// Company is the revision in force: which MCP servers it declares.
	Company func() *config.Company
	// Offered is what a caller is offered: a seat's registry, or the
	// operator catalogue.
	Offered func(authority.Caller) Registry
	// States says each declared server's state, by name, as GET
	// /mcp-servers shows it.
	States func() map[string]string
}

type serverToolsIn struct {
	Server string `json:"server" jsonschema:"the MCP server's name, as the company declares it under mcp_servers (its tools' source is mcp:<name>)"`
}

// serverTool is one tool as the catalogue holds it, whole.
type serverTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Annotations  servers.Hints   `json:"annotations"`
	Delivers     string          `json:"delivers"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

type serverToolsOut struct {
	Server string `json:"server"`
	Source Source `json:"source"`
	// Shared is false for a per-role server: each seat's own child.
	Shared bool         `json:"shared"`
	State  string       `json:"state,omitempty"`
	Tools  []serverTool `json:"tools"`
	// NoToolsBecause says why a declared server offers the caller none.
	NoToolsBecause string `json:"no_tools_because,omitempty"`
}

// catalogueTools is the table of the hub's own catalogue tools.
func catalogueTools(d catalogueDeps) []servers.Tool {
	return []servers.Tool{
		servers.Typed("list_mcp_server_tools",
			"List every tool one MCP server offers you, in full: each tool's name as you call it, its whole description, its hints, where it delivers and its input schema. Nothing is paged or cut. Name the server as the company declares it; an unknown name is answered with the servers there are.",
			servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}, "",
			func(_ context.Context, c authority.Caller, in serverToolsIn) (serverToolsOut, error) {
				return listServerTools(d, c, in)
			}),
	}
}

func listServerTools(d catalogueDeps, c authority.Caller, in serverToolsIn) (serverToolsOut, error) {
	name := strings.TrimPrefix(strings.TrimSpace(in.Server), "mcp:")
	var decl *config.MCPServer
	var names []string
	if co := d.Company(); co != nil {
		for i, s := range co.MCPServers {
			names = append(names, s.Name)
			if s.Name == name {
				decl = &co.MCPServers[i]
			}
		}
	}
	if decl == nil {
		if len(names) == 0 {
			return serverToolsOut{}, authority.Refuse(authority.NotFound, "The company declares no MCP server, so there is no %q; every tool you have is in your catalogue already.", in.Server).WithData("argument", "server")
		}
		return serverToolsOut{}, authority.Refuse(authority.NotFound, "The company declares no MCP server called %q; its servers are %s.", in.Server, strings.Join(names, ", ")).WithData("argument", "server")
	}
	out := serverToolsOut{Server: name, Source: SourceMCP(name), Shared: decl.IsShared(), State: d.States()[name], Tools: []serverTool{}}
	for _, e := range d.Offered(c).Entries() {
		if e.Source != out.Source {
			continue
		}
		out.Tools = append(out.Tools, serverTool{Name: e.Name, Description: e.Description, Annotations: e.Hints,
			Delivers: e.Delivers, InputSchema: e.InputSchema, OutputSchema: e.OutputSchema})
	}
	if len(out.Tools) == 0 {
		switch {
		case !out.Shared && c.Kind != authority.KindAgent:
			out.NoToolsBecause = "it is a per-role server: its tools are each seat's own child's, offered to that seat and not on this surface"
		case out.State != "" && out.State != rowRunning:
			out.NoToolsBecause = "its state on this node is " + out.State + "; GET /mcp-servers says why"
		default:
			out.NoToolsBecause = "it offers you no tool now"
		}
	}
	return out, nil
}

// catalogueServer is the first-party server of the catalogue's tools,
// on a hub whose company declares MCP servers to list (CAT-3).
func (h *Hub) catalogueServer() FirstParty {
	d := catalogueDeps{
		Company: h.Company,
		Offered: func(c authority.Caller) Registry {
			if c.Kind == authority.KindAgent {
				return h.SeatRegistry(c.Seat)
			}
			return CompanyRegistry(h.company)
		},
		States: func() map[string]string {
			out := map[string]string{}
			for _, r := range h.serverRows() {
				out[r.Name] = r.State
			}
			return out
		},
	}
	return FirstParty{Name: "catalogue",
		Enabled: func(c *config.Company) bool { return len(c.MCPServers) > 0 },
		// The catalogue is the hub's own, never "not run" by a company:
		// it has nothing to list until one declares an MCP server, and
		// its tool is registered as a hub starts on such a company.
		Absent: "the company declares no MCP server, so there is none whose tools to list (a hub started on a company that declares one registers it)",
		New: func(t servers.Trust, d2 Deps) *mcp.Server {
			return newCatalogueServer(d, t, d2.Logger)
		}}
}

func newCatalogueServer(d catalogueDeps, t servers.Trust, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "catalogue", Version: "1"}, nil)
	servers.Register(s, t, log, catalogueTools(d)...)
	return s
}
