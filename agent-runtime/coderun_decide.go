package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// run_sandbox, the builtin a seat hands a code task to a coding run with,
// and answer_run, a person's decision resuming a run parked with a
// question (OPS-3).

type runSandboxIn struct {
	Task string `json:"task" jsonschema:"the code task, complete in itself: the coding agent sees nothing of your turn but what you write here"`
}

// runSandboxTool is the builtin run_sandbox: registered only where a box
// can be had (BuiltinDeps.Sandbox), and run on the runtime that runs the
// calling seat's turn.
func runSandboxTool(sb *Sandbox, runtime func() *Runtime) servers.Tool {
	return servers.Typed("run_sandbox",
		"Hand a code task to a coding agent in a sandbox: a fresh workspace (a git repository) with no network, where it writes files and runs commands on your model. "+
			"Answers its outcome (done or failed), its report and the commits it made; or, when it needs a person's decision, parked with its question: put the question and the run's id to the person you act for, who answers it with answer_run. "+
			"Its workspace can be published (create_artifact or publish with source.sandbox) until your turn ends.",
		servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}, "",
		func(ctx context.Context, c authority.Caller, in runSandboxIn) (RunResult, error) {
			task := strings.TrimSpace(in.Task)
			switch {
			case task == "":
				return RunResult{}, authority.Refuse(authority.Invalid, "task is empty; write the code task, complete in itself.")
			case len(task) > maxReportBytes:
				return RunResult{}, authority.Refuse(authority.Invalid, "task is %d bytes, past the limit of %d; say it shorter.", len(task), maxReportBytes)
			}
			rt := runtime()
			if rt == nil {
				return RunResult{}, authority.Refuse(authority.Unavailable, "The agent runtime has not started on this node yet; try again in a moment.")
			}
			return rt.StartRun(ctx, c, sb, task)
		})
}

type answerRunIn struct {
	Run    string `json:"run" jsonschema:"the parked run's id, as its question was given"`
	Answer string `json:"answer" jsonschema:"your answer to the run's question; the coding agent reads it as your words and goes on"`
}

// answerRunTool resumes a parked run: for the person its question is
// for, a lead of its seat's unit or an administrator.
func answerRunTool(d DecisionDeps, runtime func() (*Runtime, error)) servers.Tool {
	return servers.Typed("answer_run",
		"Answer the question a parked coding run asked, and let it go on: answers where it stopped next (done, failed, or parked again with a new question). "+
			"Refused not_running when the run is not waiting for an answer. For the person the run asked, the lead of its seat's unit or an administrator.",
		servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}, "",
		func(ctx context.Context, c authority.Caller, in answerRunIn) (RunResult, error) {
			answer := strings.TrimSpace(in.Answer)
			switch {
			case strings.TrimSpace(in.Run) == "":
				return RunResult{}, authority.Refuse(authority.Invalid, "run is empty; give the parked run's id.")
			case answer == "":
				return RunResult{}, authority.Refuse(authority.Invalid, "answer is empty; answer the run's question.")
			case len(answer) > maxNoteBytes:
				return RunResult{}, authority.Refuse(authority.Invalid, "answer is %d bytes, past the limit of %d; shorten it and send it again.", len(answer), maxNoteBytes)
			}
			if c.Kind == authority.KindAgent {
				return RunResult{}, authority.Refuse(authority.Forbidden, "A coding run's question is a person's to answer; an AI seat cannot answer one.")
			}
			rt, err := runtime()
			if err != nil {
				return RunResult{}, err
			}
			rec, found, err := rt.opts.Store.RunByID(strings.TrimSpace(in.Run))
			if err != nil {
				return RunResult{}, err
			}
			if !found {
				return RunResult{}, authority.Refuse(authority.NotFound, "There is no coding run %s.", in.Run)
			}
			if err := mayAnswerRun(c, d.Directory(), rec); err != nil {
				return RunResult{}, err
			}
			if rec.State == RunEnded {
				return RunResult{}, authority.Refuse(authority.NotRunning, "The run %s is not waiting for an answer: it is %s.", rec.ID, runStateWords(rec))
			}
			// The probe: a run parked here is answered here; in a fleet, one
			// this node does not run is handed to the node holding its seat,
			// which alone knows whether it waits (this node's view of the
			// log may not have caught up with its park).
			out, err := rt.AnswerRun(ctx, c, rec.ID, answer)
			if errors.Is(err, ErrRunNotHere) && d.Relay != nil && !rt.Holds(rec.Seat) {
				return answerThrough(ctx, d.Relay, c, rec, answer)
			}
			if errors.Is(err, ErrRunNotHere) && rec.State == RunRunning {
				return RunResult{}, authority.Refuse(authority.NotRunning, "The run %s is not waiting for an answer: it is %s.", rec.ID, runStateWords(rec))
			}
			if errors.Is(err, ErrRunNotHere) {
				return RunResult{}, authority.Refuse(authority.Unavailable,
					"The run %s is not parked on any node that answers for @%s now (its node may have stopped: the run then ends unknown once the seat is held again); nothing was answered.", rec.ID, rec.Seat)
			}
			return out, err
		}).ForOperators()
}

// mayAnswerRun is answer_run's authority: the person the run's question
// is for, else whoever may decide about its seat (mayDecide: a lead of
// its unit or an administrator).
func mayAnswerRun(c authority.Caller, dir *authority.Directory, rec RunRecord) error {
	if c.Kind == authority.KindHuman && rec.Asker != "" && strings.EqualFold(c.Seat, rec.Asker) {
		return nil
	}
	if _, err := mayDecide(c, dir, rec.Seat, "answer the coding runs of"); err != nil {
		if errors.Is(err, authority.ErrForbidden) {
			return authority.Refuse(authority.Forbidden,
				"Only the person the run asked (@%s), the lead of @%s's unit or an administrator may answer the run %s.", rec.Asker, rec.Seat, rec.ID)
		}
		return err
	}
	return nil
}

// runStateWords says where a run is, for a refusal.
func runStateWords(rec RunRecord) string {
	if rec.State == RunEnded {
		return "ended " + rec.Outcome
	}
	return rec.State
}

// RunAnswerQuestion is the kind of question an answer_run asks the node
// holding the run's seat (Runtime.AnswerRunQuestion answers it there).
const RunAnswerQuestion = "answer_run"

// runAnswerAsk is an answer_run sent to the seat's holder: the caller was
// judged by the node asked; the holder resumes the run.
type runAnswerAsk struct {
	Caller authority.Caller `json:"caller"`
	Run    string           `json:"run"`
	Answer string           `json:"answer"`
}

// runAnswerReply is the holder's reply: where the run is, or a refusal.
type runAnswerReply struct {
	Result   RunResult       `json:"result"`
	Class    authority.Class `json:"class,omitempty"`
	Sentence string          `json:"sentence,omitempty"`
}

// AnswerRunQuestion answers an answer_run another node sent for a run
// parked here. The question must be answered at once, so the run is
// resumed on the runtime and the reply says it is running; where it
// stops next is on the log.
func (r *Runtime) AnswerRunQuestion(question []byte) []byte {
	var q runAnswerAsk
	var a runAnswerReply
	if err := json.Unmarshal(question, &q); err != nil {
		a.Class, a.Sentence = authority.Invalid, "The answer sent to this node could not be read."
	} else if res, err := r.resumeInBackground(q.Caller, q.Run, q.Answer); err != nil {
		ref := authority.Refuse(authority.Unavailable, "The node holding the run could not take the answer; try again.")
		if errors.Is(err, ErrRunNotHere) {
			ref = authority.Refuse(authority.NotRunning, "The run %s is not waiting for an answer on the node holding its seat.", q.Run)
		} else if !errors.As(err, &ref) {
			// The answerer is told only to try again: what failed is for
			// the operator, here.
			r.log.Warn("run_answer_not_taken", "run", q.Run, "error", err.Error())
		}
		a.Class, a.Sentence = ref.Class, ref.Sentence
	} else {
		a.Result = res
	}
	out, _ := json.Marshal(a)
	return out
}

// answerThrough sends an answer_run to the node holding the run's seat.
func answerThrough(ctx context.Context, relay Relay, c authority.Caller, rec RunRecord, answer string) (RunResult, error) {
	q, _ := json.Marshal(runAnswerAsk{Caller: c, Run: rec.ID, Answer: answer})
	reply, err := relay.AskSeatHolder(ctx, rec.Seat, RunAnswerQuestion, q)
	switch {
	case errors.Is(err, ErrSeatNotHeld), errors.Is(err, ErrNotFleet):
		return RunResult{}, authority.Refuse(authority.Unavailable,
			"No node of the fleet holds @%s now, so its parked run %s cannot take the answer; once the seat is held again the run ends unknown.", rec.Seat, rec.ID)
	case err != nil:
		return RunResult{}, authority.Refuse(authority.Unavailable,
			"The node holding @%s did not answer, so the run %s was not answered; try again in a moment.", rec.Seat, rec.ID)
	}
	var a runAnswerReply
	if err := json.Unmarshal(reply, &a); err != nil {
		return RunResult{}, authority.Refuse(authority.Unavailable, "The node holding @%s answered something unreadable, so the run %s may not have taken the answer; read its state before you answer again.", rec.Seat, rec.ID)
	}
	if a.Class != "" {
		return RunResult{}, &authority.Refusal{Class: a.Class, Sentence: a.Sentence}
	}
	return a.Result, nil
}
