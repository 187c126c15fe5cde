package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
)

// Who owns a coding run as its node stops or lets its seat go: a run cut
// there is never recorded as if it had ended; it stays open on the log,
// and the seat's next holder ends it unknown.

// parkingAgent asks its question at its first round; answered, it
// writes a file, then waits on hold for its model's answer: a resumed run
// the test knows to be in flight, with a round's spending behind it.
func parkingAgent(hold <-chan struct{}) modeltest.Script {
	return func(c modeltest.Conversation) modeltest.Reply {
		if !isCodingAgent(c) {
			return seatTurn(c)
		}
		switch c.Round() {
		case 0:
			return call("ask_person", map[string]any{"question": "Which greeting?"})
		case 1:
			return call("write_file", map[string]any{"path": "hello.sh", "content": "echo hi\n"})
		}
		return modeltest.Reply{Text: "late", Hold: hold}
	}
}

// parkedRun runs a turn whose coding run parks, and answers what
// run_sandbox answered.
func parkedRun(t *testing.T, h *harness) RunResult {
	t.Helper()
	h.turn()
	return runOut(t, h.model.Requests())
}

// answerInFlight answers a parked run on another goroutine and returns
// once the resumed run's model has been asked its second round (and holds
// its answer); the channel carries what AnswerRun answered.
func answerInFlight(t *testing.T, h *harness, out RunResult) <-chan RunResult {
	t.Helper()
	asked := h.model.Count()
	done := make(chan RunResult, 1)
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman, OperatorID: "laptop"}
	go func() {
		res, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "say hi")
		if err != nil {
			t.Errorf("AnswerRun: %v", err)
		}
		done <- res
	}()
	if err := h.model.WaitFor(t.Context(), asked+2); err != nil {
		t.Fatal(err)
	}
	return done
}

// spendingRows counts the seat's spending rows.
func spendingRows(t *testing.T, h *harness) int {
	t.Helper()
	rows := 0
	if err := h.store.Spending(time.Now().Add(-time.Hour), func(seat string, _ time.Time, tokens int64) {
		if seat == "alan" && tokens > 0 {
			rows++
		}
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// A resumed run cut by the node stopping while its model answers is not
// recorded failed: AnswerRun answers unknown, the log keeps the run open
// (the seat's next holder ends it unknown), and its box is removed. The
// run is the runtime's: Close returns only once it stopped, its spending
// recorded, and nothing is written for it after.
func TestResumedRunCutByCloseStaysOpen(t *testing.T) {
	h, boxes := runHarness(t, parkingAgent(make(chan struct{})), time.Hour)
	out := parkedRun(t, h)
	before := spendingRows(t, h)
	done := answerInFlight(t, h, out)
	if err := h.rt.Close(); err != nil {
		t.Fatal(err)
	}
	pos := h.store.Node().Position()
	if n := spendingRows(t, h); n != before+1 {
		t.Fatalf("%d spending rows as Close returned; want the resumed run's beside the turn's %d", n, before)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left as Close returned", n)
	}
	got := <-done
	if got.Outcome != RunUnknown {
		t.Fatalf("AnswerRun answered %+v; want unknown", got)
	}
	if after := h.store.Node().Position(); after != pos {
		t.Fatalf("the log moved from %d to %d after Close returned", pos, after)
	}
	run, _, err := h.store.RunByID(out.Run)
	if err != nil || run.State == RunEnded {
		t.Fatalf("the cut run on the log: %+v %v; want it open", run, err)
	}
}

// A node letting a seat go cuts the runs answered for it: the resumed run
// stops working (its model's late answer is not acted on), is not
// recorded ended, and its box is removed; the next holder ends it unknown.
func TestReleaseCutsAResumedRun(t *testing.T) {
	hold := make(chan struct{})
	h, boxes := runHarness(t, parkingAgent(hold), time.Hour)
	out := parkedRun(t, h)
	if err := h.rt.Claim(t.Context(), "alan"); err != nil {
		t.Fatal(err)
	}
	done := answerInFlight(t, h, out)
	if err := h.rt.Release(t.Context(), "alan"); err != nil {
		t.Fatal(err)
	}
	// The model answers after the seat was let go.
	close(hold)
	got := <-done
	if got.Outcome != RunUnknown {
		t.Fatalf("AnswerRun answered %+v; want unknown", got)
	}
	run, _, err := h.store.RunByID(out.Run)
	if err != nil || run.State == RunEnded {
		t.Fatalf("the cut run on the log: %+v %v; want it open", run, err)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the seat was let go", n)
	}
}

// An answer taken while the run's turn still runs, and that turn ending
// before the answer is recorded: the turn leaves the box to the resumed
// run, whose tools work in it (the script runs and greets as answered),
// and the box is removed once the run ends.
func TestAnswerRacingItsTurnsEndKeepsTheBox(t *testing.T) {
	held := newHeldModel(1)
	h, boxes := runHarness(t, askThenGreet(held), time.Hour)
	ended := make(chan TurnRecord, 1)
	go func() { ended <- h.turn() }()
	<-held.asked
	out := runOut(t, h.model.Requests())
	h.rt.answerTaken = func(*codeRun) {
		// The turn ends between the answer taking the run and recording
		// the answer.
		close(held.release)
		if rec := <-ended; rec.Outcome != Delivered {
			t.Errorf("the turn: %+v", rec)
		}
	}
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman}
	done, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "say hi")
	if err != nil || done.Outcome != RunDone || !strings.Contains(done.Report, "hi from the box") || len(done.Refs) != 1 {
		t.Fatalf("answered: %+v %v", done, err)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the run ended", n)
	}
}

// An answer whose recording fails parks the run again until the deadline
// its park was logged with, not a whole park from the failure: one whose
// deadline passed meanwhile ends expired at once, its box removed.
func TestFailedAnswerKeepsTheLoggedDeadline(t *testing.T) {
	held := newHeldModel(1)
	h, boxes := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			return call("ask_person", map[string]any{"question": "Which greeting?"})
		}
		held.hold(c)
		return seatTurn(c)
	}, 2*time.Second)
	ended := make(chan TurnRecord, 1)
	go func() { ended <- h.turn() }()
	defer func() { <-ended }()
	defer close(held.release)
	// Answered as soon as run_sandbox answered parked, well inside its
	// park.
	<-held.asked
	out := runOut(t, h.model.Requests())
	parked, _, err := h.store.RunByID(out.Run)
	if err != nil || parked.State != RunParked {
		t.Fatalf("the parked run: %+v %v", parked, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	h.rt.answerTaken = func(*codeRun) {
		// The park runs out while the answer is being recorded (the wait
		// is for the clock to pass the logged deadline, the event itself),
		// and the answerer's call is cut, so recording fails.
		<-time.After(time.Until(parked.Deadline))
		cancel()
	}
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman}
	if _, err := h.rt.AnswerRun(ctx, ada, out.Run, "say hi"); err == nil {
		t.Fatal("an answer whose recording failed was taken")
	}
	run, _, err := h.store.RunByID(out.Run)
	if err != nil || run.State != RunEnded || run.Outcome != RunExpired {
		t.Fatalf("the run after its failed answer past its deadline: %+v %v", run, err)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the run expired", n)
	}
}
