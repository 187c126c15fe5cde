package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decisionsCompany has bob lead the unit (not an administrator), ada an
// administrator, and carol a person with no say over the assistant. (A
// seat's holder may decide too, but a credential binds only to a person,
// so nobody holds an AI seat through one.)
var decisionsCompany = strings.Replace(company, "    lead: ada\n", "    lead: bob\n", 1) + `      - {id: carol, token: "${CAROL_TOKEN}", seat: carol}
`

var decisionsEnv = map[string]string{"ADA_TOKEN": env["ADA_TOKEN"], "BOB_TOKEN": env["BOB_TOKEN"], "MODEL_KEY": env["MODEL_KEY"],
	"CAROL_TOKEN": "carol-token-0123456789"}

func init() {
	decisionsCompany = strings.Replace(decisionsCompany, "      - {name: Bob, handle: bob, kind: human}\n",
		"      - {name: Bob, handle: bob, kind: human}\n      - {name: Carol, handle: carol, kind: human}\n", 1)
}

// refused makes an operator call that must be refused and answers its
// class.
func refused(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) authority.Class {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("%s %v: %v %s", tool, args, err, hubtest.Text(res))
	}
	class, _ := servers.ClassOf(res)
	return class
}

// OPS-3 pause_seat and resume_seat through /operator/mcp: a person with no
// say over the seat is refused forbidden, a person's seat is not_found;
// the lead of its unit pauses it; a mention meanwhile waits (the wake is
// held, no turn starts) until an administrator resumes it, and then the
// turn runs. The decisions are operator-only: listed on the operator
// surface, offered to no seat's model.
func TestPauseAndResumeASeat(t *testing.T) {
	model := modeltest.Start(t, answerOnItem("Back now."))
	n := startTurnNode(t, model, decisionsCompany, decisionsEnv)
	ada, bob := n.client(decisionsEnv["ADA_TOKEN"]), n.client(decisionsEnv["BOB_TOKEN"])
	carol := n.client(decisionsEnv["CAROL_TOKEN"])

	lt, err := ada.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tool := range lt.Tools {
		listed = append(listed, tool.Name)
	}
	for _, d := range []string{"pause_seat", "resume_seat", "steer_turn", "answer_run", "answer_knowledge"} {
		if !slices.Contains(listed, d) {
			t.Fatalf("the operator surface lists no %s: %v", d, listed)
		}
	}

	for _, tc := range []struct {
		cs    *mcp.ClientSession
		seat  string
		class authority.Class
	}{{carol, "assistant", authority.Forbidden}, {ada, "bob", authority.NotFound}, {ada, "", authority.Invalid}} {
		if got := refused(t, tc.cs, "pause_seat", map[string]any{"seat": tc.seat}); got != tc.class {
			t.Fatalf("pause_seat %q: %s, want %s", tc.seat, got, tc.class)
		}
	}
	if out := call(t, bob, "pause_seat", map[string]any{"seat": "@assistant"}); out["paused"] != true || out["seat"] != "assistant" {
		t.Fatalf("the lead's pause: %v", out)
	}
	if got := refused(t, carol, "resume_seat", map[string]any{"seat": "assistant"}); got != authority.Forbidden {
		t.Fatalf("carol's resume: %s", got)
	}

	key := call(t, ada, "create_work_item", map[string]any{"title": "While paused"})["key"].(string)
	mark := n.logs.mark()
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant are you there?"})
	n.logs.waitSince(t, mark, map[string]any{"msg": "wake_held", "seat": "assistant", "paused_by": "bob"})
	if started := n.logs.all(map[string]any{"msg": "turn_started", "seat": "assistant"}); len(started) != 0 || model.Count() != 0 {
		t.Fatalf("a paused seat started %d turns, asked its model %d times", len(started), model.Count())
	}

	call(t, ada, "resume_seat", map[string]any{"seat": "assistant"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("the wake that waited: %v", end)
	}
	first := model.Requests()[0]
	if !strings.Contains(first.UserText(), "are you there?") {
		t.Fatalf("the turn after resuming was woken by %s", first.UserText())
	}
	for _, d := range []string{"pause_seat", "resume_seat", "steer_turn", "answer_run", "answer_knowledge"} {
		if first.Offers(d) {
			t.Fatalf("the seat's model was offered %s: %v", d, first.Tools)
		}
	}
}

// OPS-3 steer_turn through /operator/mcp: an empty or long note is
// invalid; a seat running no turn is not_running; a seat no node holds has nobody to answer the probe
// (unavailable); a note to a turn in flight reaches its model at the next
// round as the sender's words.
func TestSteerATurnOnTheNode(t *testing.T) {
	asked, release := make(chan struct{}, 1), make(chan struct{})
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		switch c.Round() {
		case 0:
			asked <- struct{}{}
			<-release
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "on it"})
		}
		return finished
	})
	n := startTurnNode(t, model, decisionsCompany, decisionsEnv)
	ada, carol := n.client(decisionsEnv["ADA_TOKEN"]), n.client(decisionsEnv["CAROL_TOKEN"])
	note := map[string]any{"seat": "assistant", "note": "Check the deploy log before answering."}
	if got := refused(t, ada, "steer_turn", note); got != authority.NotRunning {
		t.Fatalf("steering an idle seat: %s", got)
	}
	for _, bad := range []string{" ", strings.Repeat("x", 4001)} {
		if got := refused(t, ada, "steer_turn", map[string]any{"seat": "assistant", "note": bad}); got != authority.Invalid {
			t.Fatalf("a note of %d bytes: %s", len(bad), got)
		}
	}

	key := call(t, ada, "create_work_item", map[string]any{"title": "Deploy failed"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant why did the deploy fail?"})
	<-asked
	if got := refused(t, carol, "steer_turn", note); got != authority.Forbidden {
		t.Fatalf("carol steering: %s", got)
	}
	out := call(t, ada, "steer_turn", note)
	close(release)
	end := n.turnEnded("assistant", key)
	if out["note"] != "queued" || out["turn"] != end["turn"] || end["outcome"] != "delivered" {
		t.Fatalf("steered %v, ended %v", out, end)
	}
	read := model.Requests()[1].UserText()
	if !strings.Contains(read, "Check the deploy log before answering.") || !strings.Contains(read, "by=@ada (human)") {
		t.Fatalf("the turn read %s", read)
	}

	if err := n.rt.Release(t.Context(), "assistant"); err != nil {
		t.Fatal(err)
	}
	if got := refused(t, ada, "steer_turn", note); got != authority.Unavailable {
		t.Fatalf("steering a seat nobody holds: %s", got)
	}
}

// OPS-3 answer_knowledge: a person's question is searched on the pages
// and the board as them, and the auxiliary model answers from what was
// found, the question fenced as theirs, charged to their seat's budget
// (past its ceiling the next question is refused budget_exhausted before
// the model is asked); a credential bound to no seat has no seat's model
// to answer on (forbidden), and an empty or long question is invalid.
func TestAnswerKnowledge(t *testing.T) {
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if strings.HasPrefix(c.System, "You answer a colleague's question") {
			return modeltest.Reply{Text: "Deploys run on Tuesdays.", Input: 60000, Output: 10}
		}
		return finished
	})
	doc := strings.Replace(company, "models:\n  default: {provider: fake, model: m-1}\n",
		"models:\n  default: {provider: fake, model: m-1}\n  auxiliary: {provider: fake, model: m-aux}\n", 1) +
		"      - {id: ci, token: \"${CI_TOKEN}\", admin: true}\n" + "budget:\n  seat: {day: 50000}\n"
	env := map[string]string{"ADA_TOKEN": env["ADA_TOKEN"], "BOB_TOKEN": env["BOB_TOKEN"], "MODEL_KEY": env["MODEL_KEY"], "CI_TOKEN": "ci-token-0123456789"}
	n := startTurnNode(t, model, doc, env)
	ada, ci := n.client(env["ADA_TOKEN"]), n.client(env["CI_TOKEN"])
	out := call(t, ada, "answer_knowledge", map[string]any{"question": "When do deploys run?"})
	if out["answer"] != "Deploys run on Tuesdays." || !strings.Contains(out["model"].(string), "m-aux") {
		t.Fatalf("answered %v", out)
	}
	searched, _ := out["searched"].([]any)
	if len(searched) != 2 || searched[0] != "pages" || searched[1] != "board" {
		t.Fatalf("searched %v", out["searched"])
	}
	asked := model.Requests()[0]
	if asked.Model != "m-aux" || len(asked.Tools) != 0 || !strings.Contains(asked.UserText(), "When do deploys run?") ||
		!strings.Contains(asked.UserText(), "by=@ada (human)") || !strings.Contains(asked.UserText(), "## What a search of the pages found") ||
		!strings.Contains(asked.UserText(), "## What a search of the board found") {
		t.Fatalf("the model was asked %s", asked.UserText())
	}
	if got := refused(t, ci, "answer_knowledge", map[string]any{"question": "When do deploys run?"}); got != authority.Forbidden {
		t.Fatalf("an unbound credential: %s", got)
	}
	if got := refused(t, ada, "answer_knowledge", map[string]any{"question": " "}); got != authority.Invalid {
		t.Fatalf("an empty question: %s", got)
	}
	if got := refused(t, ada, "answer_knowledge", map[string]any{"question": strings.Repeat("why ", 101)}); got != authority.Invalid {
		t.Fatalf("a long question: %s", got)
	}
	// The answer spent past ada's ceiling: the next is refused before
	// the model is asked.
	if got := refused(t, ada, "answer_knowledge", map[string]any{"question": "And releases?"}); got != authority.BudgetExhausted {
		t.Fatalf("past the ceiling: %s", got)
	}
	if model.Count() != 1 {
		t.Fatalf("the model was asked %d times", model.Count())
	}
}

// answer_knowledge on a company that names no chat model has nothing to
// answer with: unavailable, saying what to set.
func TestAnswerKnowledgeWithoutAModel(t *testing.T) {
	model := modeltest.Start(t, func(modeltest.Conversation) modeltest.Reply { return finished })
	doc := strings.Replace(company, "models:\n  default: {provider: fake, model: m-1}\n", "", 1)
	n := startTurnNode(t, model, doc, env)
	res, err := n.client(env["ADA_TOKEN"]).CallTool(t.Context(), &mcp.CallToolParams{Name: "answer_knowledge",
		Arguments: map[string]any{"question": "When do deploys run?"}})
	if err != nil {
		t.Fatal(err)
	}
	if class, _ := servers.ClassOf(res); class != authority.Unavailable || !strings.Contains(hubtest.Text(res), "models.auxiliary or models.default") ||
		model.Count() != 0 {
		t.Fatalf("answered %s", hubtest.Text(res))
	}
}

// OPS-2: the decisions are in the one operator catalogue, so
// /operator/act serves them as /operator/mcp does: a pause is a write, so
// it needs an Idempotency-Key, and sent twice under one key it answers
// the same.
func TestDecisionsOverOperatorAct(t *testing.T) {
	model := modeltest.Start(t, answerOnItem("Back."))
	n := startTurnNode(t, model, decisionsCompany, decisionsEnv)
	act := func(token, key string, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, n.base+"/operator/act", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, out
	}
	pause := `{"tool": "pause_seat", "arguments": {"seat": "assistant"}}`
	if code, out := act(decisionsEnv["BOB_TOKEN"], "", pause); code != http.StatusBadRequest || out["error"] != "op_id_invalid" {
		t.Fatalf("a pause with no key: %d %v", code, out)
	}
	code, first := act(decisionsEnv["BOB_TOKEN"], "pause-1", pause)
	_, again := act(decisionsEnv["BOB_TOKEN"], "pause-1", pause)
	sc, _ := first["structuredContent"].(map[string]any)
	if code != http.StatusOK || first["isError"] == true || sc["paused"] != true || fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("the pause: %d %v, again %v", code, first, again)
	}
	if _, out := act(decisionsEnv["CAROL_TOKEN"], "pause-2", pause); out["isError"] != true ||
		out["structuredContent"].(map[string]any)["class"] != string(authority.Forbidden) {
		t.Fatalf("carol's pause: %v", out)
	}
	key := call(t, n.client(decisionsEnv["ADA_TOKEN"]), "create_work_item", map[string]any{"title": "Paused?"})["key"].(string)
	mark := n.logs.mark()
	call(t, n.client(decisionsEnv["ADA_TOKEN"]), "comment_on_work_item", map[string]any{"key": key, "body": "@assistant hello"})
	n.logs.waitSince(t, mark, map[string]any{"msg": "wake_held", "seat": "assistant"})
	if _, out := act(decisionsEnv["ADA_TOKEN"], "resume-1", `{"tool": "resume_seat", "arguments": {"seat": "assistant"}}`); out["isError"] == true {
		t.Fatalf("the resume: %v", out)
	}
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("after resuming over /operator/act: %v", end)
	}
}
