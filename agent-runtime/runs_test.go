package agent

import (
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A coding run on the log: started, parked with its question, answered,
// ended once (a second end is not recorded over the first), and found by
// its id alone.
func TestRunRecordOnTheLog(t *testing.T) {
	store := NewStore(testNode(t))
	ctx := t.Context()
	seat := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "kim", TurnKey: "trk-1"}
	write := func(kind string, e runEvent) {
		t.Helper()
		e.ID, e.Seat = "run-1", "alan"
		if err := store.writeRun(ctx, seat, kind, e); err != nil {
			t.Fatal(err)
		}
	}
	read := func() RunRecord {
		t.Helper()
		rec, found, err := store.RunByID("run-1")
		if err != nil || !found {
			t.Fatalf("run-1: %v %v", found, err)
		}
		return rec
	}
	write(kindRunStarted, runEvent{Turn: "trk-1", Asker: "kim", Task: "print hello"})
	if rec := read(); rec.State != RunRunning || rec.Asker != "kim" || rec.Turn != "trk-1" || rec.Task != "print hello" {
		t.Fatalf("started: %+v", rec)
	}
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	write(kindRunParked, runEvent{Question: "Python or shell?", Deadline: deadline})
	if rec := read(); rec.State != RunParked || rec.Question != "Python or shell?" || !rec.Deadline.Equal(deadline) {
		t.Fatalf("parked: %+v", rec)
	}
	if open, err := store.OpenRuns("ALAN"); err != nil || len(open) != 1 {
		t.Fatalf("open runs: %+v %v", open, err)
	}
	write(kindRunAnswered, runEvent{AnsweredBy: "kim"})
	if rec := read(); rec.State != RunRunning || rec.Question != "" || rec.AnsweredBy != "kim" {
		t.Fatalf("answered: %+v", rec)
	}
	write(kindRunEnded, runEvent{Outcome: RunDone, Report: "printed hello"})
	write(kindRunEnded, runEvent{Outcome: RunUnknown, Report: "late"})
	if rec := read(); rec.State != RunEnded || rec.Outcome != RunDone || rec.Report != "printed hello" || rec.Ended.IsZero() {
		t.Fatalf("ended: %+v", rec)
	}
	if open, err := store.OpenRuns("alan"); err != nil || len(open) != 0 {
		t.Fatalf("open runs after the end: %+v %v", open, err)
	}
}

// A run the log shows open that no node keeps (its node stopped with it)
// ends unknown when the seat's mailbox opens, and is not run again.
func TestOrphanedRunEndsUnknown(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	c := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "kim", TurnKey: "trk-1"}
	if err := h.store.writeRun(t.Context(), c, kindRunStarted, runEvent{ID: "run-9", Seat: "alan", Turn: "trk-1", Asker: "kim"}); err != nil {
		t.Fatal(err)
	}
	h.rt.endOrphanedRuns(t.Context(), "alan")
	rec, _, err := h.store.RunByID("run-9")
	if err != nil || rec.State != RunEnded || rec.Outcome != RunUnknown {
		t.Fatalf("after the seat's mailbox opened: %+v %v", rec, err)
	}
}

// runDirectory is a company where kim asked @alan for a run, ada leads
// alan's unit, root is an administrator and eve is nobody to the run.
func runDirectory() *authority.Directory {
	return authority.NewDirectory([]authority.Unit{{ID: "core", Name: "Core", Lead: "ada"}}, []authority.Seat{
		{Handle: "ada", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "kim", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "eve", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "root", Kind: authority.SeatHuman, Admin: true},
		{Handle: "alan", Kind: authority.SeatAgent, Unit: "core"},
	})
}

// OPS-3 answer_run's authority table: the person the run asked, the lead
// of its seat's unit and an administrator pass it (and are then told the
// log shows the run parked, and no node answers for it, none being parked
// on this one); a stranger and an AI seat are refused forbidden before
// anything is looked at further; a run ended or running is not_running.
func TestAnswerRunAuthority(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	dir := func() *authority.Directory { return runDirectory() }
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server {
		return NewDecisionServer(DecisionDeps{Directory: dir, Runtime: func() *Runtime { return h.rt }}, trust, nil)
	})
	seat := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "kim", TurnKey: "trk-1"}
	for _, e := range []struct {
		kind string
		ev   runEvent
	}{
		{kindRunStarted, runEvent{ID: "run-p", Seat: "alan", Turn: "trk-1", Asker: "kim"}},
		{kindRunParked, runEvent{ID: "run-p", Seat: "alan", Question: "Which branch?"}},
		{kindRunStarted, runEvent{ID: "run-d", Seat: "alan", Turn: "trk-1", Asker: "kim"}},
		{kindRunEnded, runEvent{ID: "run-d", Seat: "alan", Outcome: RunDone}},
		{kindRunStarted, runEvent{ID: "run-r", Seat: "alan", Turn: "trk-1", Asker: "kim"}},
	} {
		if err := h.store.writeRun(t.Context(), seat, e.kind, e.ev); err != nil {
			t.Fatal(err)
		}
	}
	person := func(handle string) authority.Caller {
		return authority.Caller{Seat: handle, Kind: authority.KindHuman, Requester: handle, OperatorID: handle + "-token"}
	}
	args := map[string]any{"run": "run-p", "answer": "main"}
	for _, who := range []string{"kim", "ada", "root"} {
		r := c.Refused(person(who), "answer_run", args, authority.Unavailable)
		serverstest.MustContain(t, r.Sentence, "not parked on any node that answers for @alan")
	}
	r := c.Refused(person("eve"), "answer_run", args, authority.Forbidden)
	serverstest.MustContain(t, r.Sentence, "(@kim)", "lead of @alan's unit", "administrator")
	c.Refused(seat, "answer_run", args, authority.Forbidden)
	c.Refused(person("kim"), "answer_run", map[string]any{"run": "run-d", "answer": "x"}, authority.NotRunning)
	c.Refused(person("kim"), "answer_run", map[string]any{"run": "run-r", "answer": "x"}, authority.NotRunning)
	c.Refused(person("kim"), "answer_run", map[string]any{"run": "run-x", "answer": "x"}, authority.NotFound)
}
