package agent

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
)

// search_knowledge is registered wherever the company has a knowledge base
// at all (KB-3, BLT-1). On the engine's own, the knowledge server serves
// it over its pages. On a vendor's, which the seats reach through the
// vendor's own MCP server, it is this builtin: the search is handed to the
// vendor's search tool through the hub, as the caller, so it runs under
// the caller's own credentials at the vendor and reads only what they may,
// exactly as if they had called that tool. The vendor ranks by words, so
// hybrid is served as keyword and semantic runs nothing, each saying so in
// the words every search of the hub uses (search.Unranked).

// OfferedTool is one tool a caller is offered through the hub.
type OfferedTool struct {
	Name string
	// Source is where it comes from: builtin, or mcp:<server>.
	Source string
}

// VendorKnowledge is a vendor's knowledge base, as search_knowledge reaches
// it.
type VendorKnowledge struct {
	// Backend is the company's knowledge.backend ("confluence").
	Backend string
	// Offered lists the tools the caller is offered now.
	Offered func(c authority.Caller) []OfferedTool
	// Call calls one of them through the hub as the caller.
	Call func(ctx context.Context, c authority.Caller, tool string, args map[string]any) *mcp.CallToolResult

	how vendorSearch
}

// vendorSearch is how one vendor's MCP server searches its knowledge base:
// the tool's name at its server and the names of its arguments.
type vendorSearch struct {
	// Name is the knowledge base as a reader knows it.
	Name string
	// Tool is the search tool's name at its server; the hub offers it
	// behind the server's tool_prefix, if any.
	Tool string
	// Query, Limit and Scope name its arguments: the words, how many, and
	// the one container (a Confluence space) to search.
	Query, Limit, Scope string
	// MaxLimit is the most it answers.
	MaxLimit int
}

// vendorSearches are the knowledge backends this build reaches, by their
// knowledge.backend value: Confluence through mcp-atlassian, whose
// confluence_search takes plain words (or CQL) and ranks them by Confluence's
// own text search.
var vendorSearches = map[string]vendorSearch{
	"confluence": {Name: "Confluence", Tool: "confluence_search", Query: "query", Limit: "limit", Scope: "spaces_filter", MaxLimit: 50},
}

// NewVendorKnowledge is search_knowledge's reach into the knowledge base
// backend; nil for a backend this build has no search for (the native one
// is the knowledge server's).
func NewVendorKnowledge(backend string, offered func(authority.Caller) []OfferedTool,
	call func(context.Context, authority.Caller, string, map[string]any) *mcp.CallToolResult) *VendorKnowledge {
	vs, ok := vendorSearches[backend]
	if !ok {
		return nil
	}
	return &VendorKnowledge{Backend: backend, Offered: offered, Call: call, how: vs}
}

const vendorSearchDescription = "Search the company's knowledge base for pages by what they say; it is the vendor's (Confluence), so the search runs there under your own access. mode picks the ranking: hybrid (the default), keyword or semantic; the vendor ranks by words only, so the answer names the mode it served and says in degraded when that is not the one asked for, and a semantic search runs nothing and says so, which tells nothing about whether a page exists."

type vendorSearchIn struct {
	Query     string `json:"query" jsonschema:"what the page says, in words; at most 400 bytes"`
	Mode      string `json:"mode,omitempty" jsonschema:"hybrid (default), keyword or semantic"`
	Container string `json:"container,omitempty" jsonschema:"only this container's pages (a Confluence space key)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 50; default 10"`
}

type vendorSearchOut struct {
	// Mode is the ranking served: keyword, or none when nothing was run.
	Mode     string `json:"mode"`
	Degraded string `json:"degraded,omitempty"`
	// Searched names the vendor tool the search was handed to.
	Searched string `json:"searched,omitempty"`
	// Results are what that tool answered, as it answered it.
	Results string `json:"results,omitempty"`
}

func (v *VendorKnowledge) searchKnowledge(ctx context.Context, c authority.Caller, in vendorSearchIn) (vendorSearchOut, error) {
	vs := v.how
	if err := search.CheckQuery(search.Query{Text: in.Query, Mode: in.Mode, Limit: in.Limit}, "page", vs.MaxLimit); err != nil {
		return vendorSearchOut{}, err
	}
	mode := in.Mode
	if mode == "" {
		mode = search.ModeHybrid
	}
	served, degraded := search.Unranked(mode, vs.Name+", the company's knowledge base, ranks its search by words only", "page")
	out := vendorSearchOut{Mode: served, Degraded: degraded}
	if served == search.ModeNone {
		return out, nil
	}
	tool := ""
	for _, t := range v.Offered(c) {
		if strings.HasPrefix(t.Source, "mcp:") && strings.HasSuffix(t.Name, vs.Tool) {
			tool = t.Name
			break
		}
	}
	if tool == "" {
		return vendorSearchOut{}, authority.Refuse(authority.Unavailable,
			"The company's knowledge base is %s, searched through its MCP server's %s, and you are offered no such tool right now (its server is not declared, not started, or holds no credentials of yours), so nothing was searched. Search again once it is offered.",
			vs.Name, vs.Tool)
	}
	limit := in.Limit
	if limit == 0 {
		limit = 10
	}
	args := map[string]any{vs.Query: strings.TrimSpace(in.Query), vs.Limit: limit}
	if s := strings.TrimSpace(in.Container); s != "" {
		args[vs.Scope] = s
	}
	res := v.Call(ctx, c, tool, args)
	if res.IsError {
		class, ok := servers.ClassOf(res)
		if !ok {
			class = authority.Unavailable
		}
		return vendorSearchOut{}, authority.Refuse(class, "Searching %s through %s failed, so nothing was found or ruled out. %s", vs.Name, tool, resultText(res))
	}
	out.Searched, out.Results = tool, resultText(res)
	return out, nil
}
