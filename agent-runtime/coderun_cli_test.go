package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/sandbox"
	"github.com/crewlet/hub/sandbox/sandboxtest"
)

// A coding CLI's run, driven through a seat's real turn with the real
// OpenCode in a real box: its model calls go through the box's model
// gateway to the stand-in model, and are charged as the turn's own.

// openCodeSeat is a seat whose turn hands a task to OpenCode, and the
// OpenCode it hands it to: it writes a script, then says it is done. Each
// reply reports its own usage (cost), so what each request spent is known
// from the request alone.
func openCodeSeat(c modeltest.Conversation) modeltest.Reply {
	var rep modeltest.Reply
	switch {
	case c.Offers("run_sandbox"):
		rep = seatTurn(c)
	case !c.Offers("bash"):
		rep = modeltest.Reply{Text: "Hello script"} // the session's title
	case c.Round() == 0:
		rep = modeltest.Reply{Calls: []modeltest.Call{{ID: "w1", Name: "write",
			Args: map[string]any{"filePath": "hello.sh", "content": "echo hello\n"}}}}
	default:
		rep = modeltest.Reply{Text: "Done: hello.sh is written."}
	}
	rep.Input, rep.Output = cost(c)
	return rep
}

// cost is the usage the stand-in reports for a request: a different
// number for the seat's rounds, OpenCode's and its title's.
func cost(c modeltest.Conversation) (input, output int64) {
	switch {
	case c.Offers("run_sandbox"):
		return 100 + int64(c.Round()), 10
	case !c.Offers("bash"):
		return 7, 3
	}
	return 1000 + 100*int64(c.Round()), 20 + int64(c.Round())
}

func openCodeBox(t *testing.T) sandbox.Config {
	return sandbox.Config{Agent: sandbox.AgentSpec{CLI: "opencode", Command: sandboxtest.OpenCode(t)},
		Limits: sandbox.Limits{Wall: 3 * time.Minute, Park: time.Hour}}
}

// Issue 38: a coding CLI's model calls are the seat's spending, as the
// builtin agent's rounds are: each call OpenCode makes through the box's
// gateway is charged to the seat's budget, counted in the turn's usage
// and told to telemetry with what the stand-in reported it spent —
// streamed calls too, whose usage the gateway asks for.
func TestOpenCodeRunIsChargedToTheSeat(t *testing.T) {
	obs := &observed{}
	budget := NewBudget(func() []Ceiling { return []Ceiling{{Scope: "seat", Period: "day", Tokens: 10_000_000}} }, nil)
	h, _ := runHarnessWith(t, openCodeSeat, openCodeBox(t), func(o *Options) { o.Observer, o.Budget = obs, budget })
	rec := h.turn()
	out := runOut(t, h.model.Requests())
	if out.Outcome != RunDone || out.Report != "Done: hello.sh is written." {
		t.Fatalf("run_sandbox answered %+v", out)
	}
	var want Usage
	cli := 0
	for _, c := range h.model.Requests() {
		in, o := cost(c)
		want = want.Add(Usage{in, o})
		if !c.Offers("run_sandbox") {
			cli++
			if !c.Stream {
				t.Errorf("OpenCode asked for a whole answer; the test means its streamed ones")
			}
		}
	}
	if cli < 2 {
		t.Fatalf("OpenCode made %d model calls", cli)
	}
	if rec.Usage != want {
		t.Fatalf("the turn recorded usage %+v; the stand-in reported %+v over the turn's and OpenCode's %d calls", rec.Usage, want, cli)
	}
	if got := budget.Spent("alan", "day", time.Now()); got != want.Total() {
		t.Fatalf("the seat's budget counts %d tokens spent; the stand-in reported %d", got, want.Total())
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var told Usage
	for _, c := range obs.calls {
		if c.outcome != ModelCallOK || c.provider != "fake" || c.model != "m" {
			t.Fatalf("telemetry was told %+v", c)
		}
		told = told.Add(Usage{c.input, c.output})
	}
	if len(obs.calls) != len(h.model.Requests()) || told != want {
		t.Fatalf("telemetry was told %d calls spending %+v; the stand-in answered %d spending %+v", len(obs.calls), told, len(h.model.Requests()), want)
	}
}

// A coding CLI's run whose seat's budget is spent is stopped as a turn is:
// its model call is refused before anything is sent, the CLI is stopped,
// and the run ends failed with the budget's refusal in words.
func TestOpenCodeRunStopsWhenTheSeatsBudgetIsSpent(t *testing.T) {
	budget := NewBudget(func() []Ceiling { return []Ceiling{{Scope: "seat", Period: "day", Tokens: 1_000_000}} }, nil)
	h, boxes := runHarnessWith(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Offers("run_sandbox") && c.Round() == 0 {
			// Meanwhile the seat spent its day elsewhere (another node's
			// turn, recorded on the log).
			budget.Load("alan", time.Now(), 1_000_000)
		}
		return openCodeSeat(c)
	}, openCodeBox(t), func(o *Options) { o.Budget = budget })
	rec := h.turn()
	if rec.Outcome != BudgetExhausted {
		t.Fatalf("the turn: %+v", rec)
	}
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("the stand-in was called %d times; only the turn's first round had room", n)
	}
	var runs []RunRecord
	if err := h.store.view(func(r pebble.Reader) error {
		return scan(r, kCodeRun+"alan/", func(_ string, v []byte) error {
			var rec RunRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			runs = append(runs, rec)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].State != RunEnded || runs[0].Outcome != RunFailed ||
		!strings.HasPrefix(runs[0].Report, "This seat's token budget has no room left in its day window: 1000110 of its 1000000 tokens are spent") {
		t.Fatalf("the run on the log: %+v", runs)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left", n)
	}
}
