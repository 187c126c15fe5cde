package serve

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// OUT-2: on a running hub whose company file turns
// learning.summarize_episodes on and names an auxiliary model, a seat's
// second turn is shown its similar prior work as the auxiliary model's
// summary of the first, labelled with the model.
func TestEpisodeSummaryOnTheHub(t *testing.T) {
	const summary = "SUMMARY: last time the export timed out and you paged it."
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if strings.HasPrefix(c.System, "You summarise an agent's own past turns") {
			if c.Model != "m-aux" {
				return modeltest.Reply{Status: 500, Message: "not the auxiliary model"}
			}
			return modeltest.Reply{Text: summary}
		}
		if c.Round() == 0 {
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "Paged the export."})
		}
		return finished
	})
	doc := strings.Replace(company, "models:\n  default: {provider: fake, model: m-1}\n",
		"models:\n  default: {provider: fake, model: m-1}\n  auxiliary: {provider: fake, model: m-aux}\nlearning:\n  summarize_episodes: true\n", 1)
	n := startTurnNode(t, model, doc, env)
	ada := n.client(env["ADA_TOKEN"])
	var second string
	for i, body := range []string{"@assistant the invoice export times out.", "@assistant the invoice export times out again."} {
		key := call(t, ada, "create_work_item", map[string]any{"title": "Export"})["key"].(string)
		call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": body})
		if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
			t.Fatalf("turn %d: %v", i+1, end)
		}
		second = key
	}
	var opening string
	for _, c := range model.Requests() {
		if !strings.Contains(c.System, "You are @assistant,") || len(c.Messages) == 0 {
			continue
		}
		if first, _, _ := strings.Cut(c.Messages[0].Text, "## "); strings.Contains(first, second) {
			opening = c.Messages[0].Text
		}
	}
	if !strings.Contains(opening, "A summary by m-aux") || !strings.Contains(opening, summary) {
		t.Fatalf("the second turn's similar prior work:\n%s", opening)
	}
}
