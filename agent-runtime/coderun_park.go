package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// A coding run's park and answer: parked with its question, it is kept
// here until a person answers it (answer_run), its park runs out, or the
// node stops or lets its seat go; answered, it goes on as the runtime's
// own until it stops next.

// answerHold is the runtime's hold on a run taken for an answer, from the
// answer to the run's next stop: stop cuts it, as the node stops or lets
// its seat go. A run parked again may be answered again before the first
// hold is let go, so each answer has a hold of its own.
type answerHold struct {
	cr   *codeRun
	stop context.CancelFunc
}

// parkRun records the run parked with its question and keeps it, its
// box and conversation, for an answer until its park runs out.
func (r *Runtime) parkRun(ctx context.Context, cr *codeRun) RunResult {
	t := cr.t
	deadline := time.Now().Add(cr.park)
	out := RunResult{Run: cr.id, Outcome: RunParked, Question: cr.question, Asker: cr.asker, Rounds: cr.rounds}
	if err := r.opts.Store.writeRun(ctx, t.caller, kindRunParked,
		runEvent{ID: cr.id, Seat: t.rec.Seat, Question: cr.question, Deadline: deadline}); err != nil {
		out.Outcome, out.Question, out.Report = RunFailed, "", "The run's question could not be recorded: "+err.Error()
		r.endRun(ctx, cr, out.Outcome, out.Report)
		return out
	}
	cr.deadline = deadline
	r.mu.Lock()
	if r.runs == nil {
		r.runs = map[string]*codeRun{}
	}
	r.runs[cr.id] = cr
	closed := r.closed
	r.mu.Unlock()
	t.log.Info("run_parked", "run", cr.id, "asker", cr.asker, "question", cr.question, "deadline", deadline)
	if !closed {
		cr.mu.Lock()
		cr.timer = time.AfterFunc(cr.park, func() { r.expireRun(cr) })
		cr.mu.Unlock()
	}
	return out
}

// unpark takes a parked run out of the runtime's keeping, so exactly one
// of its answer, its expiry and the node's stop ends its park; r.mu is
// held.
func (r *Runtime) unpark(id string) *codeRun {
	cr := r.runs[id]
	delete(r.runs, id)
	if cr != nil {
		cr.mu.Lock()
		if cr.timer != nil {
			cr.timer.Stop()
		}
		cr.mu.Unlock()
	}
	return cr
}

// takeAnswered takes a parked run for an answer, nil once the node is
// stopping (Close lets go of what is parked). The run is marked resumed
// in the same step: were it marked only once its answer is recorded, its
// turn ending in between would find it neither parked nor resumed and
// remove its box from under it. It is the runtime's until letGo is
// called, once the answer failed or the run stopped (ended, cut or parked
// again): Close waits for it, and Close or its seat let go (dropRuns) cuts
// ctx, which it runs on.
func (r *Runtime) takeAnswered(base context.Context, id string) (cr *codeRun, ctx context.Context, letGo func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, nil
	}
	if cr = r.unpark(id); cr == nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(base))
	stopLife := context.AfterFunc(r.life, cancel)
	cr.mu.Lock()
	cr.resumed = true
	cr.mu.Unlock()
	h := &answerHold{cr: cr, stop: func() { stopLife(); cancel() }}
	if r.answering == nil {
		r.answering = map[*answerHold]bool{}
	}
	r.answering[h] = true
	r.wg.Add(1)
	return cr, ctx, func() {
		r.mu.Lock()
		delete(r.answering, h)
		r.mu.Unlock()
		h.stop()
		r.wg.Done()
	}
}

// expireRun ends a run whose park ran out unanswered.
func (r *Runtime) expireRun(cr *codeRun) {
	r.mu.Lock()
	taken := r.unpark(cr.id)
	r.mu.Unlock()
	if taken != cr {
		return
	}
	r.expire(cr)
}

// expire ends a run taken from its park expired, and removes its box.
func (r *Runtime) expire(cr *codeRun) {
	// The box goes first: once the log says expired, nothing is left.
	cr.closeBox()
	r.endRun(r.life, cr, RunExpired, fmt.Sprintf("Nobody answered its question within %s: %s", cr.park, cr.question))
}

// repark puts back a run whose answer could not be recorded, to wait for
// another until the deadline its park was logged with (not a whole park
// from now). One whose deadline passed meanwhile ends expired now; one
// cut (the node stopping, its seat let go: dropRuns has or will let go of
// what is parked) is not kept: it stays open on the log, and its box is
// removed.
func (r *Runtime) repark(cr *codeRun, cut context.Context) {
	r.mu.Lock()
	if r.closed || cut.Err() != nil {
		r.mu.Unlock()
		cr.closeBox()
		return
	}
	if left := time.Until(cr.deadline); left > 0 {
		r.runs[cr.id] = cr
		cr.mu.Lock()
		cr.resumed = false
		cr.timer = time.AfterFunc(left, func() { r.expireRun(cr) })
		cr.mu.Unlock()
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.expire(cr)
}

// ErrRunNotHere is what AnswerRun answers for a run this node does not
// keep parked.
var ErrRunNotHere = errors.New("agent: the run is not parked on this node")

// AnswerRun resumes a run parked here with a person's answer and answers
// where it stopped next: ended, or parked again with a new question.
func (r *Runtime) AnswerRun(ctx context.Context, c authority.Caller, id, answer string) (RunResult, error) {
	// The run goes on past the call that answered it (rctx): it is the
	// node's now, cut when the node stops or lets its seat go.
	cr, rctx, letGo := r.takeAnswered(ctx, id)
	if cr == nil {
		return RunResult{}, ErrRunNotHere
	}
	defer letGo()
	if err := r.answered(ctx, rctx, c, cr, answer); err != nil {
		return RunResult{}, err
	}
	return r.driveResumed(rctx, cr), nil
}

// RunRunningOn is the outcome an answer relayed from another node of a
// fleet answers: the run was resumed and runs on its own node; where it
// stops next is on the log.
const RunRunningOn = "running"

// resumeInBackground resumes a run parked here with an answer, and runs
// it on the runtime (until it stops next, or the node stops), answering
// at once.
func (r *Runtime) resumeInBackground(c authority.Caller, id, answer string) (RunResult, error) {
	cr, rctx, letGo := r.takeAnswered(r.life, id)
	if cr == nil {
		return RunResult{}, ErrRunNotHere
	}
	ctx, cancel := context.WithTimeout(r.life, 30*time.Second)
	defer cancel()
	if err := r.answered(ctx, rctx, c, cr, answer); err != nil {
		letGo()
		return RunResult{}, err
	}
	if rctx.Err() != nil {
		// The node is stopping or let the seat go: the run stays open on
		// the log, and the seat's next holder ends it unknown.
		cr.closeBox()
		letGo()
		return RunResult{}, ErrRunNotHere
	}
	// Counted in r.wg by takeAnswered, so Close waits for it.
	go func() {
		defer letGo()
		r.driveResumed(rctx, cr)
	}()
	return RunResult{Run: cr.id, Outcome: RunRunningOn, Rounds: cr.rounds}, nil
}

// answered records a parked run's answer and hands it to the agent as the
// parked ask_person call's result, fenced as the person's words. Not
// recorded, the run is not resumed: it is parked again, waiting for
// another answer (repark). The answer is recorded within the answerer's
// call (ctx), and not once the run is cut.
func (r *Runtime) answered(ctx, cut context.Context, c authority.Caller, cr *codeRun, answer string) error {
	if r.answerTaken != nil {
		r.answerTaken(cr)
	}
	t := cr.t
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(cut, cancel)()
	if err := r.opts.Store.writeRun(wctx, c, kindRunAnswered, runEvent{ID: cr.id, Seat: t.rec.Seat, AnsweredBy: c.Seat}); err != nil {
		r.repark(cr, cut)
		return err
	}
	t.log.Info("run_answered", "run", cr.id, "by", c.Seat, "operator_id", c.OperatorID)
	// The run is its own from here: its turn may still be running its
	// next rounds, or may have ended, and the two must not share what a
	// loop counts. Set under the run's lock: closeBox reads the turn's log
	// from whichever goroutine removes the box.
	cr.mu.Lock()
	cr.t = t.detached()
	cr.mu.Unlock()
	last := &cr.cv.Msgs[len(cr.cv.Msgs)-1]
	for i := range last.Results {
		if last.Results[i].CallID == cr.parkedCall {
			last.Results[i] = ToolResult{CallID: cr.parkedCall, Text: "@" + c.Seat + " answered:\n" + servers.Fence(answer, []servers.Author{servers.AuthorOf(c)})}
		}
	}
	cr.parkedCall, cr.question = "", ""
	return nil
}

// detached is a turn's identity, model and log without what its loop
// counts: what a resumed run asks its model through.
func (t *turn) detached() *turn {
	return &turn{r: t.r, rec: t.rec, caller: t.caller, model: t.model, spec: t.spec, log: t.log, loaded: map[string]bool{}}
}

// driveResumed drives an answered run and records what its model calls
// spent: they belong to no turn's end, which is where a turn's spending
// is recorded for the budget's windows.
func (r *Runtime) driveResumed(ctx context.Context, cr *codeRun) RunResult {
	out := r.drive(ctx, cr)
	if tokens := cr.t.usage.Total(); tokens > 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.opts.Store.spent(wctx, cr.t.caller, cr.t.rec.Seat, tokens); err != nil {
			cr.t.log.Warn("run_spending_not_recorded", "run", cr.id, "tokens", tokens, "error", err.Error())
		}
	}
	return out
}
