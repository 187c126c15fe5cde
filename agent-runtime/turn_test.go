package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

func call(name string, args any) modeltest.Reply {
	return modeltest.Reply{Calls: []modeltest.Call{{Name: name, Args: args}}}
}

var done = modeltest.Reply{Text: "Done."}

// A turn: the model is offered the seat's tools and delegate, sees the
// trigger fenced as its writer's, and every call goes out as the seat,
// acting for whoever woke it, inside the turn (BLT-3); the end is on the
// log with what the turn spent.
func TestTurnCallsAsTheSeat(t *testing.T) {
	h := newHarness(t, modeltest.Steps(call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "on it"}), done),
		[]Tool{commentTool, searchTool}, nil)
	rec := h.turn()
	if rec.Outcome != Delivered || rec.Rounds != 2 || rec.Account != "Done." || rec.Usage.Total() == 0 {
		t.Fatalf("turn %+v", rec)
	}
	first := h.model.Requests()[0]
	for _, tool := range []string{"comment_on_work_item", "search_knowledge", "delegate"} {
		if !first.Offers(tool) {
			t.Errorf("%s not offered: %v", tool, first.Tools)
		}
	}
	if !strings.Contains(first.System, "@alan") || !strings.Contains(first.System, "Be brief.") || !strings.Contains(first.System, "acts for @ada") {
		t.Errorf("system: %s", first.System)
	}
	if text := first.Messages[0].Text; !strings.Contains(text, servers.FenceOpen) || !strings.Contains(text, "by=@ada (human)") {
		t.Errorf("the trigger is not fenced as its writer's: %s", text)
	}
	calls := h.hub.surface.calls
	want := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: rec.Key}
	if len(calls) != 1 || calls[0].Caller != want || !strings.Contains(calls[0].Args, `"on it"`) {
		t.Fatalf("calls %+v", calls)
	}
}

// The delivery fence (BLT-3, WR-9): a turn that only searched is told
// once and given one more round; still reaching nobody, it ends
// undelivered. A tool whose hints are unknown counts as reaching
// somebody (CAT-7); proven read-only, the same tool does not.
func TestDeliveryFence(t *testing.T) {
	searchOnly := modeltest.Steps(call("search_knowledge", map[string]any{"query": "x"}), done)
	h := newHarness(t, searchOnly, []Tool{searchTool, commentTool}, nil)
	rec := h.turn()
	reqs := h.model.Requests()
	if rec.Outcome != Undelivered || len(reqs) != 3 || !strings.Contains(rec.Reason, "one reminder") {
		t.Fatalf("search only: %+v after %d requests", rec, len(reqs))
	}
	if n := strings.Count(reqs[2].UserText(), "only reminder"); n != 1 {
		t.Fatalf("reminded %d times: %s", n, reqs[2].UserText())
	}

	h = newHarness(t, modeltest.Steps(call("tavily_search", map[string]any{"query": "x"}), done), []Tool{unannotated}, nil)
	if rec := h.turn(); rec.Outcome != Delivered || h.model.Count() != 2 {
		t.Fatalf("unannotated tool: %+v after %d requests", rec, h.model.Count())
	}

	// Unknown hints are enough on their own, where no surface was named
	// either (a mounted tool that says nothing of itself).
	bare := Tool{Name: "page_someone", Source: "mount:pager"}
	h = newHarness(t, modeltest.Steps(call("page_someone", map[string]any{"who": "x"}), done), []Tool{bare}, nil)
	if rec := h.turn(); rec.Outcome != Delivered || h.model.Count() != 2 {
		t.Fatalf("unknown hints, no surface: %+v after %d requests", rec, h.model.Count())
	}

	readOnly := unannotated
	readOnly.Hints = servers.Hints{ReadOnly: servers.Yes, OpenWorld: servers.Yes}
	readOnly.Delivers = ""
	h = newHarness(t, modeltest.Steps(call("tavily_search", map[string]any{"query": "x"}), done), []Tool{readOnly}, nil)
	if rec := h.turn(); rec.Outcome != Undelivered || h.model.Count() != 3 {
		t.Fatalf("annotated read-only: %+v after %d requests", rec, h.model.Count())
	}

	// Reaching somebody after the reminder passes; so does a private
	// write, not at all.
	h = newHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		switch c.Round() {
		case 0:
			return call("reflect_and_persist", map[string]any{"note": "x"})
		case 1:
			return done
		case 2:
			return call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "here"})
		}
		return done
	}, []Tool{diaryTool, commentTool}, nil)
	if rec := h.turn(); rec.Outcome != Delivered || h.model.Count() != 4 {
		t.Fatalf("delivered after the reminder: %+v after %d requests", rec, h.model.Count())
	}
}

// The worker guard (BLT-3): a worker delegate starts is offered only the
// tools whose hints prove them read-only, and a write tool or an
// unannotated one is refused forbidden before it runs; a read-only one
// runs. delegate is built per turn (CAT-6) and reaches nobody.
func TestWorkerGuard(t *testing.T) {
	script := func(c modeltest.Conversation) modeltest.Reply {
		if isWorker(c) {
			if c.Round() == 0 {
				return modeltest.Reply{Calls: []modeltest.Call{
					{Name: "comment_on_work_item", Args: map[string]any{"key": "CORE-1", "body": "from a worker"}},
					{Name: "tavily_search", Args: map[string]any{"query": "q"}},
					{Name: "search_knowledge", Args: map[string]any{"query": "q"}},
				}}
			}
			return modeltest.Reply{Text: "the worker found three pages"}
		}
		switch c.Round() {
		case 0:
			return call("delegate", map[string]any{"task": "find the pages about onboarding"})
		case 1:
			return call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "summary"})
		}
		return done
	}
	h := newHarness(t, script, []Tool{commentTool, unannotated, searchTool}, nil)
	rec := h.turn()
	if rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
	var worker []modeltest.Conversation
	for _, c := range h.model.Requests() {
		if isWorker(c) {
			worker = append(worker, c)
		}
	}
	if len(worker) != 2 {
		t.Fatalf("%d worker requests", len(worker))
	}
	if got := worker[0].Tools; len(got) != 1 || got[0] != "search_knowledge" {
		t.Fatalf("the worker was offered %v", got)
	}
	res := worker[1].LastResults()
	if len(res) != 3 || !strings.HasPrefix(res[0].Text, "Refused (forbidden)") || !strings.HasPrefix(res[1].Text, "Refused (forbidden)") ||
		!strings.Contains(res[1].Text, "read_only: unknown") || res[2].Text != "ok search_knowledge" {
		t.Fatalf("the worker's results: %+v", res)
	}
	// Only the read-only call and the turn's own comment reached the hub.
	if got := strings.Join(h.hub.surface.names(), ","); got != "search_knowledge,comment_on_work_item" {
		t.Fatalf("calls that ran: %s", got)
	}
	main := h.model.Requests()[len(h.model.Requests())-2]
	if r := main.Results(); len(r) == 0 || r[0].Text != "the worker found three pages" {
		t.Fatalf("delegate's answer: %+v", r)
	}
}

// REF-2 budget_exhausted: once a ceiling is reached the next model call is
// refused before anything is sent, and the turn ends with the sentence.
func TestBudgetEndsTheTurn(t *testing.T) {
	first := call("search_knowledge", map[string]any{"query": "x"})
	first.Input, first.Output = 900, 200
	h := newHarness(t, modeltest.Steps(first, done), []Tool{searchTool}, func(o *Options) {
		o.Budget = NewBudget(func() []Ceiling { return []Ceiling{{Scope: "seat", Period: "day", Tokens: 1000}} }, nil)
	})
	rec := h.turn()
	if rec.Outcome != BudgetExhausted || h.model.Count() != 1 || !strings.Contains(rec.Reason, "This seat's token budget has no room left in its day window") {
		t.Fatalf("turn %+v after %d requests", rec, h.model.Count())
	}
	if rec.Usage != (Usage{900, 200}) {
		t.Fatalf("usage %+v", rec.Usage)
	}
	// What ended turns spent is reloaded from the log by a new runtime.
	b := NewBudget(nil, nil)
	if err := h.store.Spending(time.Now().Add(-time.Hour), b.Load); err != nil {
		t.Fatal(err)
	}
	if got := b.Spent("alan", "day", time.Now()); got != 1100 {
		t.Fatalf("reloaded %d", got)
	}
}

// A budget that cannot be decided — a fleet's shared counters out of
// reach — refuses the model call unavailable, and the turn ends failed
// with that sentence: nothing says a ceiling was reached, so it is not
// budget_exhausted (REF-2, issue 27).
func TestUndecidableBudgetFailsTheTurn(t *testing.T) {
	counters := testNode(t)
	bucket, err := counters.DurableTTLBucket(t.Context(), BudgetBucket)
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(func() []Ceiling { return []Ceiling{{Scope: "seat", Period: "day", Tokens: 1000}} }, nil)
	h := newHarness(t, modeltest.Steps(done), nil, func(o *Options) { o.Budget = budget })
	budget.Share(bucket, h.store)
	if err := counters.Close(); err != nil {
		t.Fatal(err)
	}
	rec := h.turn()
	if rec.Outcome != Failed || h.model.Count() != 0 || !strings.Contains(rec.Reason, "budget counters did not answer") {
		t.Fatalf("turn %+v after %d requests", rec, h.model.Count())
	}
}

// A tool skill guards its tools (ART-9, REF-5): create_artifact is held
// back forbidden until load_tool_skill loads skill:artifacts in the turn.
func TestToolSkillGuard(t *testing.T) {
	create := Tool{Name: "create_artifact", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.No}}
	load := Tool{Name: "load_tool_skill", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}}
	h := newHarness(t, modeltest.Steps(
		call("create_artifact", map[string]any{"title": "x"}),
		call("load_tool_skill", map[string]any{"key": "skill:artifacts"}),
		call("create_artifact", map[string]any{"title": "x"}),
		call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "made"}),
		done,
	), []Tool{create, load, commentTool}, func(o *Options) { o.ToolSkills = BundledToolSkills(func(string) bool { return true }) })
	h.turn()
	reqs := h.model.Requests()
	if r := reqs[1].LastResults(); len(r) != 1 || !strings.Contains(r[0].Text, "Refused (forbidden)") || !strings.Contains(r[0].Text, "skill:artifacts") {
		t.Fatalf("before the skill: %+v", r)
	}
	if got := strings.Join(h.hub.surface.names(), ","); got != "load_tool_skill,create_artifact,comment_on_work_item" {
		t.Fatalf("calls that ran: %s", got)
	}
}

// A turn keeps running after a refusal: an unknown tool goes to the
// router (not_found), and the model reads the class.
func TestUnknownToolReachesTheRouter(t *testing.T) {
	h := newHarness(t, modeltest.Steps(call("no_such_tool", nil), call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "x"}), done),
		[]Tool{commentTool}, nil)
	rec := h.turn()
	if r := h.model.Requests()[1].LastResults(); len(r) != 1 || !strings.HasPrefix(r[0].Text, "Refused (not_found)") {
		t.Fatalf("results %+v", r)
	}
	if rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
}

func TestWireNames(t *testing.T) {
	byWire, defs := wireNames([]Tool{{Name: "a.b"}, {Name: "a_b"}, {Name: strings.Repeat("x", 70)}, {Name: "ok-name"}})
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "a_b,a_b_2,"+strings.Repeat("x", 64)+",ok-name" || byWire["a_b"].Name != "a.b" || byWire["a_b_2"].Name != "a_b" {
		t.Fatalf("wire names %v", names)
	}
}

// OUT-3: a turn's reason quotes whatever failed, and the log refuses an
// entry past its message size (8 MiB), which would cost the turn its end
// record. The end carries the reason's head, at most 64 KiB with the cut
// said, and the feed is told the same clipped text for the item's
// activity.
func TestTurnEndClipsItsReason(t *testing.T) {
	huge := "the company file's model entry is broken: " + strings.Repeat("detail ", (9<<20)/7)
	var noted string
	h := newHarness(t, modeltest.Steps(done), nil, func(o *Options) {
		o.Seat = func(string) (SeatSpec, bool, error) { return SeatSpec{}, false, errors.New(huge) }
		o.Feeds = []Feed{{Name: "test",
			Read:  func(string, int) ([]servers.Wake, error) { return nil, nil },
			Last:  func() (string, error) { return "", nil },
			Ended: func(_ context.Context, rec TurnRecord) error { noted = rec.Reason; return nil }}}
	})
	rec := h.turn() // fails the test if the end was never recorded
	if rec.Outcome != NotRun || len(rec.Reason) > state.DiagnosticBytes ||
		!strings.HasPrefix(rec.Reason, "The seat's model could not be resolved: the company file's model entry is broken: detail") ||
		!strings.Contains(rec.Reason, "more bytes of this error left out]") {
		t.Fatalf("outcome %s, %d bytes of reason ending %q", rec.Outcome, len(rec.Reason), rec.Reason[max(0, len(rec.Reason)-80):])
	}
	if noted != rec.Reason {
		t.Fatalf("the feed was told %d bytes, the record holds %d", len(noted), len(rec.Reason))
	}
}
