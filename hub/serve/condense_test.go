package serve

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// OUT-2: a seat that reads a long file a person wrote, without an offset,
// is handed all of it condensed by its auxiliary model, not its opening:
// the model is asked to condense the file piece by piece, and the seat's
// next round sees the condensed text fenced as the person's and labelled
// condensed, with the way to read it as written.
func TestLongArtifactCondensedForTheSeat(t *testing.T) {
	long := strings.Repeat("Ship on Friday; the rollback plan is in section four.\n", 2000) // 108,000 bytes
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if strings.HasPrefix(c.System, "You condense a text") {
			return modeltest.Reply{Text: "CONDENSED: ship on Friday, roll back by section four."}
		}
		switch c.Round() {
		case 0:
			return reply("get_artifact", map[string]any{"id": artifactRe.FindString(c.UserText())})
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "read it"})
		}
		return finished
	})
	n := startTurnNode(t, model, company, env)
	ada := n.client(env["ADA_TOKEN"])
	id := call(t, ada, "create_artifact", map[string]any{"kind": "doc", "title": "Launch plan", "content": long})["id"].(string)
	call(t, ada, "share_artifact", map[string]any{"id": id, "to": "assistant", "role": "viewer"})
	key := call(t, ada, "create_work_item", map[string]any{"title": "Read the plan"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant what does " + id + " say?"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("turn: %v", end)
	}
	var pieces, seen string
	for _, c := range model.Requests() {
		switch {
		case strings.HasPrefix(c.System, "You condense a text"):
			pieces += c.UserText()
		case c.Round() == 1:
			seen = c.LastResults()[0].Text
		}
	}
	if strings.Count(pieces, "Ship on Friday") != 2000 {
		t.Fatalf("the model was given %d of the file's 2000 lines to condense", strings.Count(pieces, "Ship on Friday"))
	}
	for _, want := range []string{"CONDENSED: ship on Friday", "what=condensed", "@ada (human)", "condensed by", "offset 0"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the seat's read does not say %q: %.600s", want, seen)
		}
	}
	if strings.Contains(seen, "the rollback plan is in section four") {
		t.Error("the seat was handed the file's text as written, not condensed")
	}
}
