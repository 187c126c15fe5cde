package serve

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func reply(name string, args any) modeltest.Reply {
	return modeltest.Reply{Calls: []modeltest.Call{{Name: name, Args: args}}}
}

var finished = modeltest.Reply{Text: "Done."}

// answerOnItem is a model that comments on the item that woke it, then
// stops.
func answerOnItem(body string) modeltest.Script {
	return func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": body})
		}
		return finished
	}
}

// TRK-4, BLT-3, CAT-10: a person's comment naming @assistant wakes the
// seat; its model is offered the seat's tools (never an operator-only
// one) and the trigger fenced as the person's; its tool call posts on the
// item as the seat. The same over the chat-completions API and the
// Messages API. The provider's key reaches the provider only.
func TestTurnAnswersOnTheItem(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			model := modeltest.Start(t, answerOnItem("Looking into it now."))
			doc := company
			if api == "anthropic" {
				doc = strings.Replace(doc, `fake: {api: openai, base_url: "{{MODEL}}/v1"`, `fake: {api: anthropic, base_url: "{{MODEL}}"`, 1)
			}
			n := startTurnNode(t, model, doc, env)
			ada := n.client(env["ADA_TOKEN"])
			key := call(t, ada, "create_work_item", map[string]any{"title": "The login page is slow"})["key"].(string)
			call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant can you look at this?"})
			if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
				t.Fatalf("turn ended %v", end)
			}
			item := call(t, ada, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)
			thread := item["thread"].([]any)
			if len(thread) != 2 {
				t.Fatalf("thread %v", thread)
			}
			reply := thread[1].(map[string]any)
			if reply["by"] != "assistant" || !strings.Contains(reply["body"].(string), "by=@assistant (agent)") ||
				!strings.Contains(reply["body"].(string), "Looking into it now.") {
				t.Fatalf("the seat's comment: %v", reply)
			}
			first := model.Requests()[0]
			if first.API != api || !first.Offers("comment_on_work_item") || !first.Offers("lookup_colleague") || first.Offers("write_work_catalogue") {
				t.Fatalf("offered %v", first.Tools)
			}
			if !strings.Contains(first.UserText(), "<<<untrusted") || !strings.Contains(first.UserText(), "@assistant can you look at this?") ||
				!strings.Contains(first.UserText(), "by=@ada (human)") {
				t.Fatalf("the trigger: %s", first.UserText())
			}
			if got := first.Header.Get("Authorization"); got != "Bearer "+env["MODEL_KEY"] {
				t.Fatalf("the provider got %q", got)
			}
			if strings.Contains(n.logs.text(), env["MODEL_KEY"]) {
				t.Fatal("the provider's key is in the log")
			}
		})
	}
}

// fenceCompany adds the tavily example's server twice: as advertised (no
// annotations) and with tool_annotations proving its search read-only.
const fenceCompany = company + `
mcp_servers:
  - {name: tavily, url: "{{UPSTREAM}}", trust: auto}
  - name: tavilyro
    url: "{{UPSTREAM}}"
    trust: auto
    tool_prefix: ro_
    tool_annotations:
      tavily_search: {read_only: true, open_world: true}
`

var askedTo = regexp.MustCompile(`use (\S+)`)

// BLT-3, WR-9, CAT-7, CAT-8, CAT-9: the delivery fence. A turn that only
// searched the knowledge base is reminded once and ends undelivered, on
// the log and on the item's activity; one that only called an MCP tool
// whose server advertised no hints passes, since it may have reached
// somebody; the same tool made read-only by tool_annotations no longer
// does. The worker guard: a worker delegate started is refused a write
// tool and an unannotated tool before they run, and runs a read-only one.
func TestFenceAndWorkerGuard(t *testing.T) {
	upstream := hubtest.Upstream(t, &mcp.Tool{Name: "tavily_search", Description: "Search the web."})
	script := func(c modeltest.Conversation) modeltest.Reply {
		if strings.HasPrefix(c.System, "You are a short-lived worker") {
			if c.Round() == 0 {
				return modeltest.Reply{Calls: []modeltest.Call{
					{Name: "comment_on_work_item", Args: map[string]any{"key": "CORE-1", "body": "a worker's comment"}},
					{Name: "tavily_search", Args: map[string]any{"query": "q"}},
					{Name: "ro_tavily_search", Args: map[string]any{"query": "q"}},
				}}
			}
			return modeltest.Reply{Text: "worker done"}
		}
		tool := askedTo.FindStringSubmatch(c.UserText())[1]
		switch {
		case c.Round() > 0 && tool == "delegate" && c.Round() == 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "delegated and answered"})
		case c.Round() > 0:
			return finished
		case tool == "delegate":
			return reply("delegate", map[string]any{"task": "search the web for q"})
		case tool == "search_knowledge":
			return reply(tool, map[string]any{"query": "onboarding"})
		}
		return reply(tool, map[string]any{"query": "q"})
	}
	model := modeltest.Start(t, script)
	n := startTurnNode(t, model, strings.ReplaceAll(fenceCompany, "{{UPSTREAM}}", upstream), env)
	ada := n.client(env["ADA_TOKEN"])
	for _, tc := range []struct{ tool, outcome string }{
		{"delegate", "delivered"}, // CORE-1: its worker is the one scripted above
		{"search_knowledge", "undelivered"},
		{"tavily_search", "delivered"},
		{"ro_tavily_search", "undelivered"},
	} {
		key := call(t, ada, "create_work_item", map[string]any{"title": "Find out about " + tc.tool})["key"].(string)
		before := model.Count()
		call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant use " + tc.tool + " please"})
		end := n.turnEnded("assistant", key)
		if end["outcome"] != tc.outcome {
			t.Fatalf("%s: ended %v", tc.tool, end)
		}
		requests := model.Count() - before
		activity := call(t, ada, "list_activity", map[string]any{"item": key})["activity"].([]any)
		noted := false
		for _, a := range activity {
			noted = noted || a.(map[string]any)["action"] == "turn_undelivered"
		}
		switch tc.outcome {
		case "undelivered":
			if requests != 3 || end["level"] != "WARN" || !noted {
				t.Fatalf("%s: %d model calls, end %v, noted on the activity %v", tc.tool, requests, end, noted)
			}
		case "delivered":
			if noted || tc.tool == "tavily_search" && requests != 2 {
				t.Fatalf("%s: %d model calls, noted on the activity %v", tc.tool, requests, noted)
			}
		}
	}
	var worker []modeltest.Conversation
	for _, c := range model.Requests() {
		if strings.HasPrefix(c.System, "You are a short-lived worker") {
			worker = append(worker, c)
		}
	}
	if len(worker) != 2 || len(worker[0].Tools) == 0 || worker[0].Offers("comment_on_work_item") || worker[0].Offers("tavily_search") || !worker[0].Offers("ro_tavily_search") {
		t.Fatalf("the worker was offered %v", worker[0].Tools)
	}
	res := worker[1].LastResults()
	if len(res) != 3 || !strings.HasPrefix(res[0].Text, "Refused (forbidden)") || !strings.HasPrefix(res[1].Text, "Refused (forbidden)") ||
		!strings.HasPrefix(res[2].Text, "tavily_search ") {
		t.Fatalf("the worker's results: %+v", res)
	}
	thread := call(t, ada, "get_work_item", map[string]any{"key": "CORE-1"})["item"].(map[string]any)["thread"].([]any)
	for _, c := range thread {
		if strings.Contains(c.(map[string]any)["body"].(string), "a worker's comment") {
			t.Fatal("the worker's write ran")
		}
	}
}

var artifactRe = regexp.MustCompile(`art_[A-Za-z0-9_]+`)

// ART-2, BLT-3: a turn acts for whoever woke it. The artifact store decides
// every call for the seat and then for the requester, so the same call in
// the same seat's turn opens an artifact for the person it is shared
// with, and for a person with no share it does not exist.
func TestRequesterReachesTheArtifactStore(t *testing.T) {
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		switch c.Round() {
		case 0:
			return reply("get_artifact", map[string]any{"id": artifactRe.FindString(c.UserText())})
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "read it"})
		}
		return finished
	})
	n := startTurnNode(t, model, company, env)
	ada, bob := n.client(env["ADA_TOKEN"]), n.client(env["BOB_TOKEN"])
	id := call(t, ada, "create_artifact", map[string]any{"kind": "doc", "title": "Launch plan", "content": "# The plan\nShip on Friday."})["id"].(string)
	call(t, ada, "share_artifact", map[string]any{"id": id, "to": "assistant", "role": "viewer"})
	results := map[string]string{}
	for _, p := range []struct {
		who string
		cs  *mcp.ClientSession
	}{{"ada", ada}, {"bob", bob}} {
		key := call(t, p.cs, "create_work_item", map[string]any{"title": p.who + " asks"})["key"].(string)
		call(t, p.cs, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant what does " + id + " say?"})
		if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
			t.Fatalf("%s's turn: %v", p.who, end)
		}
		for _, c := range model.Requests() {
			if c.Round() == 1 && itemOf(c) == key {
				results[p.who] = c.LastResults()[0].Text
			}
		}
	}
	if !strings.Contains(results["ada"], "Ship on Friday.") || strings.HasPrefix(results["ada"], "Refused") {
		t.Fatalf("for ada: %s", results["ada"])
	}
	if !strings.HasPrefix(results["bob"], "Refused (not_found)") || strings.Contains(results["bob"], "Ship on Friday") {
		t.Fatalf("for bob: %s", results["bob"])
	}
}

// REF-2 budget_exhausted: a ceiling reached refuses the next model call
// before anything is sent, and the turn ends with the sentence, in the
// log and on the item's activity.
func TestBudgetExhaustedEndsTheTurn(t *testing.T) {
	first := reply("search_knowledge", map[string]any{"query": "plans"})
	first.Input, first.Output = 60000, 20
	model := modeltest.Start(t, modeltest.Steps(first, finished))
	n := startTurnNode(t, model, company+"budget:\n  seat: {day: 50000}\n", env)
	ada := n.client(env["ADA_TOKEN"])
	key := call(t, ada, "create_work_item", map[string]any{"title": "Plans"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant find our plans"})
	end := n.turnEnded("assistant", key)
	if end["outcome"] != "budget_exhausted" || model.Count() != 1 ||
		!strings.Contains(end["reason"].(string), "This seat's token budget has no room left in its day window") {
		t.Fatalf("ended %v after %d model calls", end, model.Count())
	}
	activity := call(t, ada, "get_activity", map[string]any{"id": call(t, ada, "list_activity", map[string]any{"item": key})["activity"].([]any)[0].(map[string]any)["id"]})
	if b, _ := json.Marshal(activity); !strings.Contains(string(b), "turn_budget_exhausted") || !strings.Contains(string(b), "budget.seat.day") {
		t.Fatalf("activity %s", b)
	}
}
