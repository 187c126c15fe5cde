package serve

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
)

// OPS-3 answer_run on a fleet (FLT-1, issue 38): a coding run lives on the
// node running its seat, and an answer given through another node is
// decided there (a stranger is refused forbidden) and handed to the
// holder, which resumes the run; answer_run answers that it runs, and
// the run's end is on the holder's log, the agent having read the answer
// as its writer's words.
func TestAnswerRunOnAnotherNode(t *testing.T) {
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if strings.HasPrefix(c.System, "You are the coding agent") {
			if c.Round() == 0 {
				return reply("ask_person", map[string]any{"question": "Which name shall the tool have?"})
			}
			return reply("finish", map[string]any{"report": "Named it as told: " + c.LastResults()[0].Text})
		}
		switch c.Round() {
		case 0:
			return reply("run_sandbox", map[string]any{"task": "Write the tool; ask its name first."})
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "The run asks a question."})
		}
		return finished
	})
	nodes := startFleetTurnNodes(t, model, decisionsCompany, decisionsEnv, 3)
	holder := holderOf(t, nodes, "assistant")
	other := nodes[(holder+1)%len(nodes)]
	ada, carol := other.client(decisionsEnv["ADA_TOKEN"]), other.client(decisionsEnv["CAROL_TOKEN"])

	key := call(t, ada, "create_work_item", map[string]any{"title": "A new tool"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant write the tool"})
	parked := nodes[holder].logs.waitSince(t, 0, map[string]any{"msg": "run_parked", "question": "Which name shall the tool have?"})
	args := map[string]any{"run": parked["run"], "answer": "Call it sprocket."}

	if class := refused(t, carol, "answer_run", args); class != authority.Forbidden {
		t.Fatalf("carol's answer through another node: %s", class)
	}
	if out := call(t, ada, "answer_run", args); out["outcome"] != "running" || out["run"] != parked["run"] {
		t.Fatalf("ada's answer through another node: %v", out)
	}
	nodes[holder].logs.waitSince(t, 0, map[string]any{"msg": "run_ended", "run": parked["run"], "outcome": "done"})
	var resumed modeltest.Conversation
	for _, c := range model.Requests() {
		if strings.HasPrefix(c.System, "You are the coding agent") && c.Round() == 1 {
			resumed = c
		}
	}
	if got := resumed.LastResults(); len(got) != 1 || !strings.Contains(got[0].Text, "Call it sprocket.") || !strings.Contains(got[0].Text, "by=@ada (human)") {
		t.Fatalf("the agent read the answer as %+v", got)
	}
}
