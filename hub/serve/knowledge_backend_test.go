package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/serverstest"
)

// confluenceCompany runs its knowledge base on Confluence, reached through
// an MCP server that lists Confluence's search behind a tool_prefix, as
// mcp-atlassian does. The server is per role, under the assistant's own
// credentials: the assistant is offered the search, and nobody else is.
var confluenceCompany = strings.Replace(company,
	`{name: Assistant, handle: assistant,`,
	`{name: Assistant, handle: assistant, mcp_env: {atlassian: {X-Confluence-User: assistant}},`, 1) + `
knowledge: {backend: confluence}
mcp_servers:
  - {name: atlassian, url: "{{UPSTREAM}}", shared: false, trust: auto, tool_prefix: atl_}
`

// KB-3, BLT-1 (issue 30): search_knowledge is registered wherever the
// company has a knowledge base at all, Confluence too, where none of the
// native page tools is. A seat's turn is offered it and its search runs
// at Confluence through the vendor's own tool, as the seat; the vendor
// ranks by words, so hybrid is served as keyword and says so, and
// semantic runs nothing and says so, in the words the hub's own search
// uses. On the operator surface it is the same tool, and a person who is
// offered no Confluence search is told so rather than answered nothing.
func TestSearchKnowledgeOnConfluence(t *testing.T) {
	upstream := hubtest.Upstream(t, &mcp.Tool{Name: "confluence_search", Description: "Search Confluence."})
	script := func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			return reply("search_knowledge", map[string]any{"query": "onboarding checklist", "container": "ENG", "limit": 5})
		}
		return finished
	}
	model := modeltest.Start(t, script)
	n := startTurnNode(t, model, strings.ReplaceAll(confluenceCompany, "{{UPSTREAM}}", upstream), env)
	ada := n.client(env["ADA_TOKEN"])
	key := call(t, ada, "create_work_item", map[string]any{"title": "Where is the onboarding list?"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant find it please"})
	n.turnEnded("assistant", key)

	_, hybrid := search.Unranked(search.ModeHybrid, "Confluence, the company's knowledge base, ranks its search by words only", "page")
	var searched bool
	for _, c := range model.Requests() {
		if !c.Offers("search_knowledge") || c.Offers("write_page") || c.Offers("list_pages") {
			t.Fatalf("the seat was offered %v", c.Tools)
		}
		if c.Round() != 1 {
			continue
		}
		res := c.LastResults()
		if len(res) != 1 || res[0].IsError {
			t.Fatalf("search_knowledge in the seat's turn: %+v", res)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(res[0].Text), &out); err != nil {
			t.Fatalf("search_knowledge answered %q: %v", res[0].Text, err)
		}
		if out["mode"] != search.ModeKeyword || out["degraded"] != hybrid || out["searched"] != "atl_confluence_search" {
			t.Fatalf("search_knowledge in the seat's turn: %v", out)
		}
		// What the vendor's tool was asked, as it echoed it.
		serverstest.MustContain(t, out["results"].(string), "confluence_search ", `"query":"onboarding checklist"`, `"spaces_filter":"ENG"`, `"limit":5`)
		searched = true
	}
	if !searched {
		t.Fatal("the seat's turn never searched")
	}

	res, err := ada.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_knowledge", Arguments: map[string]any{"query": "onboarding", "mode": "keyword"}})
	if class, _ := servers.ClassOf(res); err != nil || class != authority.Unavailable {
		t.Fatalf("ada, offered no Confluence search: %v %q %s", err, class, hubtest.Text(res))
	}
	serverstest.MustContain(t, hubtest.Text(res), "Confluence", "confluence_search", "nothing was searched")
	_, semantic := search.Unranked(search.ModeSemantic, "Confluence, the company's knowledge base, ranks its search by words only", "page")
	got := call(t, ada, "search_knowledge", map[string]any{"query": "onboarding", "mode": "semantic"})
	if got["mode"] != search.ModeNone || got["degraded"] != semantic || got["results"] != nil || got["searched"] != nil {
		t.Fatalf("semantic: %v", got)
	}
	res, err = ada.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_knowledge", Arguments: map[string]any{"query": "onboarding", "mode": "fuzzy"}})
	if err != nil || !res.IsError || !strings.Contains(hubtest.Text(res), `mode "fuzzy" is not hybrid, keyword or semantic`) {
		t.Fatalf("an unknown mode: %v %s", err, hubtest.Text(res))
	}
}
