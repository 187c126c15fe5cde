package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// BLT-1, OUT-2: on a running hub whose company file turns
// learning.synthesize_skills on and names an auxiliary model, a delivered
// turn of several tools leaves a skill the seat's next turn is shown and
// uses; and that turn's recall of the first, whose ask was past 600
// bytes, is condensed by the auxiliary model and labelled so.
func TestSkillSynthesisAndCondensedRecallOnTheHub(t *testing.T) {
	const (
		marker    = "Northwind's export"
		procedure = "1. Look the reporter up.\n2. List the open items.\n3. Comment with the fix."
	)
	long := "@assistant " + marker + " times out. " + strings.Repeat("It stops after ten minutes with a gateway timeout on 48,000 invoices. ", 10)
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		switch {
		case strings.HasPrefix(c.System, "You condense a text"):
			return modeltest.Reply{Text: "CONDENSED: the export times out on 48,000 invoices."}
		case strings.HasPrefix(c.System, "You read back a turn"):
			if c.Model != "m-aux" {
				return modeltest.Reply{Status: 500, Message: "not the auxiliary model"}
			}
			if strings.Contains(c.UserText(), "gateway timeout") {
				return modeltest.Reply{Text: "SKILL: export-triage\n" + procedure}
			}
			return modeltest.Reply{Text: "NONE"}
		}
		first, _, _ := strings.Cut(c.Messages[0].Text, "## ")
		if strings.Contains(first, marker) {
			switch c.Round() {
			case 0:
				return modeltest.Reply{Calls: []modeltest.Call{
					{Name: "lookup_colleague", Args: map[string]any{"query": "ada"}},
					{Name: "list_work_items", Args: map[string]any{}},
					{Name: "refresh_memory", Args: map[string]any{}},
				}}
			case 1:
				return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "Paged the export."})
			}
			return finished
		}
		switch c.Round() {
		case 0:
			return modeltest.Reply{Calls: []modeltest.Call{
				{Name: "use_skill", Args: map[string]any{"name": "export-triage"}},
				{Name: "query_episodes", Args: map[string]any{}},
			}}
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "Done again."})
		}
		return finished
	})
	doc := strings.Replace(company, "models:\n  default: {provider: fake, model: m-1}\n",
		"models:\n  default: {provider: fake, model: m-1}\n  auxiliary: {provider: fake, model: m-aux}\nlearning:\n  synthesize_skills: true\n", 1)
	n := startTurnNode(t, model, doc, env)
	ada := n.client(env["ADA_TOKEN"])

	first := call(t, ada, "create_work_item", map[string]any{"title": "Export times out"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": first, "body": long})
	if end := n.turnEnded("assistant", first); end["outcome"] != "delivered" {
		t.Fatalf("the first turn: %v", end)
	}
	n.logs.waitSince(t, 0, map[string]any{"msg": "skill_synthesized", "seat": "assistant", "name": "export-triage"})

	second := call(t, ada, "create_work_item", map[string]any{"title": "Export again"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": second, "body": "@assistant the export failed again, same as before."})
	if end := n.turnEnded("assistant", second); end["outcome"] != "delivered" {
		t.Fatalf("the second turn: %v", end)
	}
	var opening string
	var results []modeltest.Result
	for _, c := range model.Requests() {
		if !strings.Contains(c.System, "You are @assistant,") || len(c.Messages) == 0 {
			continue
		}
		if first, _, _ := strings.Cut(c.Messages[0].Text, "## "); strings.Contains(first, second) && c.Round() == 1 {
			opening, results = c.Messages[0].Text, c.LastResults()
		}
	}
	if len(results) != 2 {
		t.Fatalf("the second turn's results: %+v", results)
	}
	if !strings.Contains(opening, "export-triage") {
		t.Errorf("the second turn was not shown its skill:\n%s", opening)
	}
	var used struct{ Body string }
	if err := json.Unmarshal([]byte(results[0].Text), &used); err != nil || used.Body != procedure {
		t.Errorf("use_skill: %q", results[0].Text)
	}
	var recalled struct {
		Episodes []struct {
			Ask          string `json:"ask"`
			AskCondensed string `json:"ask_condensed"`
		} `json:"episodes"`
	}
	if err := json.Unmarshal([]byte(results[1].Text), &recalled); err != nil || len(recalled.Episodes) != 1 {
		t.Fatalf("query_episodes: %q", results[1].Text)
	}
	if e := recalled.Episodes[0]; !strings.Contains(e.Ask, "CONDENSED: the export times out") || strings.Contains(e.Ask, "gateway timeout") ||
		!strings.Contains(e.AskCondensed, "m-aux") {
		t.Errorf("the recalled ask: %+v", e)
	}
}
