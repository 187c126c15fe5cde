package serve

import (
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
)

// ART-1: the thirteen artifact tools.
var artifactTools = []string{"list_artifacts", "get_artifact", "list_dashboard_sources", "create_artifact", "publish_artifact",
	"update_artifact", "share_artifact", "unshare_artifact", "upload_artifact_asset", "read_artifact_data",
	"query_artifact_data", "write_artifact_data", "set_artifact_schema"}

// ART-1: a node run as `crewlet serve` runs it serves all thirteen
// artifact tools on its operator catalogue, list_dashboard_sources among
// them, answering the engine's sources for what the company runs (the
// native board and pages here, and its seats); an agent seat's turn is
// offered the tool too and reads the same sources through it.
func TestRunningNodeServesThirteenArtifactTools(t *testing.T) {
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		switch c.Round() {
		case 0:
			return reply("list_dashboard_sources", map[string]any{})
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "listed them"})
		}
		return finished
	})
	n := startTurnNode(t, model, company, env)
	ada := n.client(env["ADA_TOKEN"])

	lt, err := ada.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tool := range lt.Tools {
		listed = append(listed, tool.Name)
	}
	for _, name := range artifactTools {
		if !slices.Contains(listed, name) {
			t.Errorf("the operator catalogue lacks %s: %v", name, listed)
		}
	}

	var names []string
	for _, s := range call(t, ada, "list_dashboard_sources", map[string]any{})["sources"].([]any) {
		names = append(names, s.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"seats", "work_items", "knowledge_pages"}) {
		t.Fatalf("ada reads the sources %v", names)
	}

	key := call(t, ada, "create_work_item", map[string]any{"title": "A board of our work"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant what could a dashboard read?"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("the turn: %v", end)
	}
	var offered bool
	var result string
	for _, c := range model.Requests() {
		if itemOf(c) != key {
			continue
		}
		if c.Round() == 0 {
			offered = c.Offers("list_dashboard_sources")
		}
		if c.Round() == 1 {
			result = c.LastResults()[0].Text
		}
	}
	if !offered {
		t.Fatal("the seat's turn was not offered list_dashboard_sources")
	}
	if strings.HasPrefix(result, "Refused") || !strings.Contains(result, "work_items") || !strings.Contains(result, "knowledge_pages") {
		t.Fatalf("the seat read: %s", result)
	}
}

// ART-1: the sources follow what the company runs now, and a viewer the
// company does not know reads none of them.
func TestEngineSourcesFollowTheCompany(t *testing.T) {
	doc := "units:\n  - id: core\n    name: Core\n    roles:\n      - {name: Ada, handle: ada, kind: human}\n"
	names := func(extra string, viewer authority.Caller) []string {
		t.Helper()
		c, err := config.Parse([]byte(doc + extra))
		if err != nil {
			t.Fatal(err)
		}
		src, err := engineSources{company: func() *config.Company { return c }, directory: c.Directory}.List(t.Context(), viewer)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range src {
			out = append(out, s.Name)
		}
		return out
	}
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada"}
	if got := names("tracker: {backend: jira}\n", ada); !slices.Equal(got, []string{"seats", "knowledge_pages"}) {
		t.Errorf("on jira: %v", got)
	}
	if got := names("", authority.Caller{Seat: "token:ci", Kind: authority.KindOperator}); len(got) != 3 {
		t.Errorf("an operator credential: %v", got)
	}
	if got := names("", authority.Caller{Seat: "ghost", Kind: authority.KindHuman}); len(got) != 0 {
		t.Errorf("a seat nobody declares: %v", got)
	}
}
