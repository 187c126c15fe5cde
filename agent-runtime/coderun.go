package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
)

// A coding run: run_sandbox hands a code task to the builtin coding agent,
// which works in a box of its own (package sandbox) on the seat's own
// model, under the seat's budget and telemetry, through the same model
// loop as the turn's other helpers (converse). Its tools are operations
// in the box and nothing else: write_file, read_file, list_files,
// run_command, and two that end its work for now, ask_person (the run
// parks with a question for the person the turn acts for) and finish
// (its report).
//
// Ownership: a run belongs to the runtime of the node running its seat.
// Its box is the turn's until the turn ends (so a build in it can be
// published, source.sandbox), then removed; a parked run keeps its box
// until its park ends, answered (answer_run) or expired (limits.park). An
// answered run is the runtime's from the answer to its next stop: Close
// waits for it, and Close or the seat let go cuts it (dropRuns).

// Sandbox is where coding runs' boxes are made; nil where this node can
// have none (no bwrap), and then run_sandbox is not registered (CAT-3).
type Sandbox struct {
	// Config is the company's sandbox block in force, read per run.
	Config func() sandbox.Config
	// Dir is where boxes are made: it holds nothing a box may not see.
	Dir string
	// Env is the environment of everything run in a box (sandbox.Env:
	// the host allowlist and what the sandbox block names).
	Env func() []string
}

// open makes a fresh box for one run, and answers the park its run may
// wait in.
func (s *Sandbox) open(ctx context.Context) (*sandbox.Box, time.Duration, error) {
	cfg := s.Config().WithDefaults()
	// The park is the runtime's to keep, not the box's: the box is
	// handed none, and holds the run to the rest of its limits.
	park := cfg.Limits.Park
	cfg.Limits.Park = 0
	box, err := sandbox.Open(ctx, cfg, s.Dir, s.Env())
	return box, park, err
}

// Defaults of a coding run.
const (
	// DefaultRunRounds bounds a coding run's model rounds, counted apart
	// from its turn's.
	DefaultRunRounds = 32
	// maxRunQuestionBytes bounds ask_person's question and maxReportBytes
	// finish's report: each is sent on to a person or a turn whole, so a
	// longer one is refused and the agent says it shorter.
	maxRunQuestionBytes = 4000
	maxReportBytes      = 64 << 10
)

// RunResult is what run_sandbox and answer_run answer: where a run
// stopped.
type RunResult struct {
	Run string `json:"run"`
	// Outcome is done, failed or expired once it ended, parked while it
	// waits for a person's answer.
	Outcome string `json:"outcome"`
	// Report is the agent's report (done), or why it failed.
	Report string `json:"report,omitempty"`
	// Question is what a parked run asks, and Asker whom.
	Question string `json:"question,omitempty"`
	Asker    string `json:"asker,omitempty"`
	// Refs are the commits the agent made in its workspace's repository
	// ("<sha> <subject>"), at most 16 KiB of whole refs; RefsLeftOut
	// counts the rest.
	Refs        []string `json:"refs,omitempty"`
	RefsLeftOut int      `json:"refs_left_out,omitempty"`
	Rounds      int      `json:"rounds"`
}

// codeRun is one coding run in the memory of the node running it.
type codeRun struct {
	id    string
	seat  string
	t     *turn
	box   *sandbox.Box
	park  time.Duration
	asker string
	task  string

	mu sync.Mutex
	cv conversation
	// parkedCall is the ask_person call whose answer the run waits for.
	parkedCall string
	question   string
	rounds     int
	timer      *time.Timer
	// deadline is when its park ends, as the log has it.
	deadline time.Time
	// resumed: taken for an answer, it runs on past its turn's hold (which
	// no longer removes its box); closed: its box is removed.
	resumed, closed bool
}

// closeBox removes the run's box, once.
func (cr *codeRun) closeBox() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.closed {
		return
	}
	cr.closed = true
	if err := cr.box.Close(); err != nil {
		cr.t.log.Warn("run_box_not_removed", "run", cr.id, "error", err.Error())
	}
}

// turnOf is the turn a seat's call belongs to, if it runs here now.
func (r *Runtime) turnOf(c authority.Caller) *turn {
	if c.Kind != authority.KindAgent || c.TurnKey == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.running[strings.ToLower(c.Seat)]
	if t == nil || t.rec.Key != c.TurnKey {
		return nil
	}
	return t
}

// StartRun starts a coding run for the turn the caller's call belongs to
// and answers where it stopped: ended, or parked with its question.
func (r *Runtime) StartRun(ctx context.Context, c authority.Caller, sb *Sandbox, task string) (RunResult, error) {
	t := r.turnOf(c)
	if t == nil {
		return RunResult{}, authority.Refuse(authority.Forbidden,
			"run_sandbox runs inside an AI seat's turn on the node running it, and this call belongs to none running here.")
	}
	box, park, err := sb.open(ctx)
	if err != nil {
		t.log.Warn("run_box_not_opened", "error", err.Error())
		return RunResult{}, authority.Refuse(authority.Unavailable, "No box could be made for the run (%v); nothing ran.", err)
	}
	cr := &codeRun{id: newRunID(t.rec.Key), seat: t.rec.Seat, t: t, box: box, park: park, asker: t.rec.Requester, task: task}
	cr.cv = conversation{System: fmt.Sprintf(codingSystem, t.rec.Seat), Msgs: []Message{{From: FromUser, Text: task}}, Defs: boxToolDefs()}
	t.boxMu.Lock()
	t.runs = append(t.runs, cr)
	t.boxMu.Unlock()
	if err := r.opts.Store.writeRun(ctx, t.caller, kindRunStarted,
		runEvent{ID: cr.id, Seat: t.rec.Seat, Turn: t.rec.Key, Asker: cr.asker, Task: task}); err != nil {
		return RunResult{}, err
	}
	t.log.Info("run_started", "run", cr.id, "agent", agentName(box.Config().Agent))
	if !box.Config().Agent.Builtin() {
		return r.runCLI(ctx, cr), nil
	}
	return r.drive(ctx, cr), nil
}

// agentName is the agent a box's runs are worked by.
func agentName(a sandbox.AgentSpec) string {
	if a.Builtin() {
		return "builtin"
	}
	return a.CLI
}

// drive works the run's conversation until the agent finishes, asks a
// person, or cannot go on, and records where it stopped on the log.
func (r *Runtime) drive(ctx context.Context, cr *codeRun) RunResult {
	t := cr.t
	// The run's rounds are its own: they do not eat into its turn's.
	before := t.rounds
	var report string
	parked, finished := false, false
	end, rounds, refusal, err := t.converse(ctx, &cr.cv, r.opts.RunRounds-cr.rounds, false, func(c ToolCall) (ToolResult, bool) {
		res, stop := cr.boxCall(ctx, c)
		switch {
		case stop && c.Name == "ask_person":
			parked, cr.parkedCall, cr.question = true, c.ID, res.Text
		case stop:
			finished, report = true, res.Text
		}
		return res, stop
	})
	t.rounds = before
	cr.rounds += rounds
	out := RunResult{Run: cr.id, Rounds: cr.rounds}
	switch {
	case ctx.Err() != nil:
		// Cut with its turn (the seat let go, the node stopping): it stays
		// open on the log, and the seat's next holder ends it unknown. This
		// comes first: a cut model call is an error too, and would read as
		// the run failing; and a node that let the seat go records nothing
		// more as it, even where the model's last answer beat the cut.
		t.log.Info("run_cut", "run", cr.id, "reason", "its turn was cut or the node is stopping")
		cr.closeBox()
		return RunResult{Run: cr.id, Outcome: RunUnknown, Report: "The run was cut: its turn was cut or the node is stopping.", Rounds: cr.rounds}
	case refusal != nil:
		out.Outcome, out.Report = RunFailed, refusal.Sentence
	case err != nil:
		out.Outcome, out.Report = RunFailed, err.Error()
	case end == endStopped && parked:
		return r.parkRun(ctx, cr)
	case end == endStopped && finished:
		out.Outcome, out.Report = RunDone, report
	case end == endAnswered:
		// The agent ended without finish: its last words are the report.
		out.Outcome, out.Report = RunDone, cr.cv.Answer
	default:
		out.Outcome, out.Report = RunFailed, fmt.Sprintf("The run used its %d model rounds without finishing.", r.opts.RunRounds)
	}
	if refs, err := cr.box.Commits(context.WithoutCancel(ctx)); err != nil {
		t.log.Warn("run_refs_unreadable", "run", cr.id, "error", err.Error())
	} else {
		out.Refs, out.RefsLeftOut = refs.Refs, refs.LeftOut
	}
	r.endRun(ctx, cr, out.Outcome, out.Report)
	return out
}

// endRun records a run's end. A run whose turn has ended has nobody left
// to read its box, so the box goes with it; one whose turn runs keeps it
// until the turn ends.
func (r *Runtime) endRun(ctx context.Context, cr *codeRun, outcome, report string) {
	t := cr.t
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.opts.Store.writeRun(wctx, t.caller, kindRunEnded, runEvent{ID: cr.id, Seat: t.rec.Seat, Outcome: outcome, Report: report}); err != nil {
		t.log.Error("run_end_not_recorded", "run", cr.id, "error", err.Error())
	}
	t.log.Info("run_ended", "run", cr.id, "outcome", outcome, "rounds", cr.rounds)
	if r.turnOf(t.caller) != t {
		cr.closeBox()
	}
}

// endOrphanedRuns ends unknown every run of a seat the log shows open
// and this node does not keep: its node stopped with it, and it is never
// run again on its own.
func (r *Runtime) endOrphanedRuns(ctx context.Context, seat string) {
	open, err := r.opts.Store.OpenRuns(seat)
	if err != nil {
		r.log.Warn("runs_unreadable", "seat", seat, "error", err.Error())
		return
	}
	for _, rec := range open {
		if r.keeps(rec.ID) {
			continue
		}
		c := authority.Caller{Seat: rec.Seat, Kind: authority.KindAgent, Requester: rec.Asker, TurnKey: rec.Turn}
		if err := r.opts.Store.writeRun(ctx, c, kindRunEnded, runEvent{ID: rec.ID, Seat: rec.Seat, Outcome: RunUnknown,
			Report: "The node running it stopped while it was " + rec.State + "; what it did is not known, and it is not run again."}); err != nil {
			r.log.Warn("run_end_not_recorded", "seat", seat, "run", rec.ID, "error", err.Error())
			continue
		}
		r.log.Info("run_ended", "seat", seat, "run", rec.ID, "outcome", RunUnknown, "reason", "the node running it stopped")
	}
}

// keeps reports whether a run is this node's: parked here, or answered
// here and not yet let go.
func (r *Runtime) keeps(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, parked := r.runs[id]; parked {
		return true
	}
	for h := range r.answering {
		if h.cr.id == id {
			return true
		}
	}
	return false
}

// closeRuns ends the turn's hold on its runs' boxes: every box but a
// parked run's is removed as the turn's Execute phase ends.
func (t *turn) closeRuns() {
	t.boxMu.Lock()
	runs := t.runs
	t.runs = nil
	t.boxMu.Unlock()
	for _, cr := range runs {
		// Both read in one step under the runtime's lock, as takeAnswered
		// and repark change them: between the two a run is one or the other.
		t.r.mu.Lock()
		_, parked := t.r.runs[cr.id]
		cr.mu.Lock()
		resumed := cr.resumed
		cr.mu.Unlock()
		t.r.mu.Unlock()
		if !parked && !resumed {
			cr.closeBox()
		}
	}
}

// dropRuns removes the boxes of every run parked here, and cuts every run
// answered here (which then removes its own), as the node stops or lets
// their seat go: a node that no longer holds a seat works and spends
// nothing more for it. The log keeps them open, and the seat's next
// holder ends them unknown.
func (r *Runtime) dropRuns(seat string) {
	r.mu.Lock()
	var drop []*codeRun
	for id, cr := range r.runs {
		if seat == "" || strings.EqualFold(cr.seat, seat) {
			drop = append(drop, cr)
			delete(r.runs, id)
		}
	}
	// Cut under r.mu, which repark reads the cut under: a run whose answer
	// fails now is not parked again after this sweep.
	for h := range r.answering {
		if seat == "" || strings.EqualFold(h.cr.seat, seat) {
			h.stop()
		}
	}
	r.mu.Unlock()
	for _, cr := range drop {
		cr.mu.Lock()
		if cr.timer != nil {
			cr.timer.Stop()
		}
		cr.mu.Unlock()
		cr.closeBox()
	}
}

// BuildBox is the box of the latest run of the turn a call belongs to,
// readable from when run_sandbox returns until the turn ends
// (source.sandbox); nil when the turn has none.
func (r *Runtime) BuildBox(c authority.Caller) *sandbox.Box {
	t := r.turnOf(c)
	if t == nil {
		return nil
	}
	t.boxMu.Lock()
	defer t.boxMu.Unlock()
	for i := len(t.runs) - 1; i >= 0; i-- {
		cr := t.runs[i]
		cr.mu.Lock()
		closed := cr.closed
		cr.mu.Unlock()
		if !closed {
			return cr.box
		}
	}
	return nil
}
