package agent

import (
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
)

// Who owns a coding run as its node stops or lets its seat go: a run cut
// there is never recorded as if it had ended; it stays open on the log,
// and the seat's next holder ends it unknown.

// parkingAgent asks its question at its first round and, answered, waits
// on hold for its model's answer: a resumed run the test knows to be in
// flight.
func parkingAgent(hold <-chan struct{}) modeltest.Script {
	return func(c modeltest.Conversation) modeltest.Reply {
		if !isCodingAgent(c) {
			return seatTurn(c)
		}
		if c.Round() == 0 {
			return call("ask_person", map[string]any{"question": "Which greeting?"})
		}
		return modeltest.Reply{Text: "late", Hold: hold}
	}
}

// answerInFlight parks a run, answers it on another goroutine and returns
// once the resumed run's model has been asked (and holds its answer); the
// channel carries what AnswerRun answered.
func answerInFlight(t *testing.T, h *harness) (RunResult, <-chan RunResult) {
	t.Helper()
	h.turn()
	out := runOut(t, h.model.Requests())
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
	if err := h.model.WaitFor(t.Context(), asked+1); err != nil {
		t.Fatal(err)
	}
	return out, done
}

// A resumed run cut by the node stopping while its model answers is not
// recorded failed: AnswerRun answers unknown, the log keeps the run open
// (the seat's next holder ends it unknown), and its box is removed.
func TestResumedRunCutByCloseStaysOpen(t *testing.T) {
	h, boxes := runHarness(t, parkingAgent(make(chan struct{})), time.Hour)
	out, done := answerInFlight(t, h)
	if err := h.rt.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Outcome != RunUnknown {
		t.Fatalf("AnswerRun answered %+v; want unknown", got)
	}
	run, _, err := h.store.RunByID(out.Run)
	if err != nil || run.State == RunEnded {
		t.Fatalf("the cut run on the log: %+v %v; want it open", run, err)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the node stopped", n)
	}
}
