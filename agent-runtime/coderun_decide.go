package agent

import (
	"context"
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
			if rec.State != RunParked {
				return RunResult{}, authority.Refuse(authority.NotRunning, "The run %s is not waiting for an answer: it is %s.", rec.ID, runStateWords(rec))
			}
			out, err := rt.AnswerRun(ctx, c, rec.ID, answer)
			if errors.Is(err, ErrRunNotHere) {
				return RunResult{}, authority.Refuse(authority.Unavailable,
					"The run %s is parked on the node running @%s, not this one; answer it there, or once this node holds the seat (a run whose node stopped ends unknown).", rec.ID, rec.Seat)
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
