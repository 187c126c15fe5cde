package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// A coding run on the log. run_sandbox starts one inside a seat's turn;
// it ends done or failed within the turn, or parks with a question for a
// person and waits, its box kept, until answer_run resumes it or its park
// runs out (expired). A run lives in the memory of the node that runs the
// seat: its box and its conversation are there and nowhere else. So a
// run the log still shows open when a seat's mailbox opens is one whose
// node stopped with it: it ends unknown, and is never run again on its
// own (what it did to its box is gone with the box).

const (
	kCodeRun = "ag/coderun/" // + seat/run id -> RunRecord
	kRunSeat = "ag/runseat/" // + run id -> its seat
)

// Operation kinds of a coding run, one projector each.
const (
	kindRunStarted  = "agent.run.started"
	kindRunParked   = "agent.run.parked"
	kindRunAnswered = "agent.run.answered"
	kindRunEnded    = "agent.run.ended"
)

// Outcomes a coding run ends with.
const (
	// RunDone: the agent called finish with its report.
	RunDone = "done"
	// RunFailed: the agent could not go on (its model failed, its budget
	// ran out, its rounds ran out, or its box could not be had).
	RunFailed = "failed"
	// RunExpired: it was parked with a question nobody answered within
	// limits.park.
	RunExpired = "expired"
	// RunUnknown: the node running it stopped; what it did is not known.
	RunUnknown = "unknown"
)

// Run states on the log.
const (
	RunRunning = "running"
	RunParked  = "parked"
	RunEnded   = "ended"
)

// RunRecord is one coding run as the log keeps it.
type RunRecord struct {
	ID   string `json:"id"`
	Seat string `json:"seat"`
	// Turn is the turn that started it.
	Turn string `json:"turn"`
	// Asker is the person the seat's turn acts for: the one a parked
	// run's question is for.
	Asker string `json:"asker"`
	Task  string `json:"task"`
	State string `json:"state"`
	// Question is what a parked run asks; Deadline is when its park ends
	// unanswered.
	Question string    `json:"question,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	// AnsweredBy is who answered its last question.
	AnsweredBy string `json:"answered_by,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	// Report is the head of the run's report (or why it failed), as long
	// as an entry of the log carries.
	Report  string    `json:"report,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
}

// runEvent is what each of a run's operations carries: the record's
// fields it sets.
type runEvent struct {
	ID         string    `json:"id"`
	Seat       string    `json:"seat"`
	Turn       string    `json:"turn,omitempty"`
	Asker      string    `json:"asker,omitempty"`
	Task       string    `json:"task,omitempty"`
	Question   string    `json:"question,omitempty"`
	Deadline   time.Time `json:"deadline,omitzero"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	Outcome    string    `json:"outcome,omitempty"`
	Report     string    `json:"report,omitempty"`
}

func runProjectors() []state.Projector {
	return []state.Projector{
		servers.Projector(kindRunStarted, applyRun(func(rec *RunRecord, e runEvent, at time.Time) bool {
			if rec.ID != "" {
				// A start recorded twice changes nothing.
				return false
			}
			*rec = RunRecord{ID: e.ID, Seat: e.Seat, Turn: e.Turn, Asker: e.Asker, Task: e.Task, State: RunRunning, Started: at}
			return true
		})),
		servers.Projector(kindRunParked, applyRun(func(rec *RunRecord, e runEvent, _ time.Time) bool {
			if rec.State != RunRunning {
				return false
			}
			rec.State, rec.Question, rec.Deadline = RunParked, e.Question, e.Deadline
			return true
		})),
		servers.Projector(kindRunAnswered, applyRun(func(rec *RunRecord, e runEvent, _ time.Time) bool {
			if rec.State != RunParked {
				return false
			}
			rec.State, rec.Question, rec.Deadline, rec.AnsweredBy = RunRunning, "", time.Time{}, e.AnsweredBy
			return true
		})),
		servers.Projector(kindRunEnded, applyRun(func(rec *RunRecord, e runEvent, at time.Time) bool {
			if rec.ID == "" || rec.State == RunEnded {
				// The first end stands: a run ends once.
				return false
			}
			rec.State, rec.Outcome, rec.Report, rec.Ended = RunEnded, e.Outcome, e.Report, at
			rec.Question, rec.Deadline = "", time.Time{}
			return true
		})),
	}
}

// applyRun projects one of a run's operations onto its record: change
// reports whether the record moved (a late or repeated one does not).
func applyRun(change func(rec *RunRecord, e runEvent, at time.Time) bool) func(*servers.Apply) (any, error) {
	return func(a *servers.Apply) (any, error) {
		var e runEvent
		if err := a.Payload(&e); err != nil {
			return nil, err
		}
		key := kCodeRun + strings.ToLower(e.Seat) + "/" + e.ID
		var rec RunRecord
		if _, err := state.GetJSON(a.R, key, &rec); err != nil {
			return nil, err
		}
		if !change(&rec, e, a.At()) {
			return nil, nil
		}
		if err := state.SetJSON(a.B, kRunSeat+e.ID, rec.Seat); err != nil {
			return nil, err
		}
		return nil, state.SetJSON(a.B, key, rec)
	}
}

// writeRun records one of a run's operations as the caller.
func (s *Store) writeRun(ctx context.Context, c authority.Caller, kind string, e runEvent) error {
	// A run parks and is answered as often as it asks, each operation
	// told apart by when it was made; the projector keeps a run's end the
	// first one recorded.
	e.Report = state.ClipDiagnostic(e.Report)
	_, err := s.write(ctx, c, "run/"+e.ID+"/"+kind, time.Now(), kind, map[string]string{"run": e.ID}, e)
	return err
}

// Run reads one coding run's record.
func (s *Store) Run(seat, id string) (RunRecord, bool, error) {
	var rec RunRecord
	var found bool
	err := s.view(func(r pebble.Reader) error {
		var err error
		found, err = state.GetJSON(r, kCodeRun+strings.ToLower(seat)+"/"+id, &rec)
		return err
	})
	return rec, found, err
}

// RunByID reads one coding run's record by its id alone.
func (s *Store) RunByID(id string) (RunRecord, bool, error) {
	var rec RunRecord
	var found bool
	err := s.view(func(r pebble.Reader) error {
		var seat string
		ok, err := state.GetJSON(r, kRunSeat+id, &seat)
		if err != nil || !ok {
			return err
		}
		found, err = state.GetJSON(r, kCodeRun+strings.ToLower(seat)+"/"+id, &rec)
		return err
	})
	return rec, found, err
}

// OpenRuns lists a seat's coding runs that have not ended.
func (s *Store) OpenRuns(seat string) ([]RunRecord, error) {
	var out []RunRecord
	err := s.view(func(r pebble.Reader) error {
		return scan(r, kCodeRun+strings.ToLower(seat)+"/", func(_ string, v []byte) error {
			var rec RunRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if rec.State != RunEnded {
				out = append(out, rec)
			}
			return nil
		})
	})
	return out, err
}

// newRunID names a run: its turn and when it started, so a turn run
// again after a crash starts a run of its own rather than landing on the
// one that ended unknown.
func newRunID(turn string) string {
	return fmt.Sprintf("run-%s-%x", turn, time.Now().UnixNano())
}
