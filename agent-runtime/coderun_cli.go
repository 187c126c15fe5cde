package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
)

// runCLI hands the run's task to the coding CLI the sandbox block names,
// in the same box, on the seat's own model reached through the box's
// model gateway (the provider's key never enters the box): its JSON
// event stream is the transcript and its last message the report. A CLI
// run does not park: it asks nobody.
func (r *Runtime) runCLI(ctx context.Context, cr *codeRun) RunResult {
	t := cr.t
	spec := t.spec.Model
	out := RunResult{Run: cr.id}
	if spec.API != "openai" {
		out.Outcome = RunFailed
		out.Report = fmt.Sprintf("The coding CLI %s speaks the chat-completions API, and @%s's model is on the %s API; set a model on an openai provider for the seat, or agent: builtin.",
			cr.box.Config().Agent.CLI, t.rec.Seat, spec.API)
		r.endRun(ctx, cr, out.Outcome, out.Report)
		return out
	}
	res, err := cr.box.RunCLI(ctx, sandbox.CLITask{Prompt: cr.task, Model: spec.Model,
		Provider: sandbox.Provider{BaseURL: spec.BaseURL, Header: http.Header{"Authorization": {"Bearer " + spec.APIKey}},
			Meter: cr.cliMeter(ctx)}})
	var refusal *authority.Refusal
	switch {
	case ctx.Err() != nil:
		t.log.Info("run_cut", "run", cr.id, "reason", "its turn was cut or the node is stopping")
		cr.closeBox()
		return RunResult{Run: cr.id, Outcome: RunUnknown, Report: "The run was cut: its turn was cut or the node is stopping."}
	case errors.As(err, &refusal):
		// A model call refused (the seat's budget spent) stopped the
		// CLI, as it ends a turn.
		out.Outcome, out.Report = RunFailed, refusal.Sentence
	case err != nil:
		out.Outcome, out.Report = RunFailed, "The coding CLI could not run: "+err.Error()
	case res.Exit != 0:
		out.Outcome = RunFailed
		out.Report = fmt.Sprintf("The coding CLI ended with exit status %d. %s\n%s", res.Exit, res.Why, res.Report)
		if res.Stderr != "" {
			out.Report += "\nIts error stream ends:\n" + res.Stderr
		}
	default:
		out.Outcome, out.Report = RunDone, res.Report
	}
	if refs, err := cr.box.Commits(context.WithoutCancel(ctx)); err == nil {
		out.Refs, out.RefsLeftOut = refs.Refs, refs.LeftOut
	}
	r.endRun(ctx, cr, out.Outcome, out.Report)
	return out
}

// cliMeter is the box's model gateway's meter for a coding CLI's run:
// each call the CLI makes is charged as the turn's own model calls are
// (charge), to the seat's budget, the turn's usage and telemetry, and a
// call the budget has no room for is refused, which stops the run. What
// the provider reported is what is charged; where it reported nothing,
// the call's bytes are estimated as a turn's own call's would be
// (fillUsage).
func (cr *codeRun) cliMeter(ctx context.Context) sandbox.Meter {
	t := cr.t
	return func(requestBytes int) (func(sandbox.ModelCall), error) {
		done, refusal := t.charge(estimateTokens(requestBytes), "run", cr.id, "cli", cr.box.Config().Agent.CLI)
		if refusal != nil {
			return nil, refusal
		}
		return func(c sandbox.ModelCall) {
			var err error
			switch {
			case c.Err != nil:
				err = c.Err
			case c.Status >= 400:
				err = &providerStatus{status: c.Status, said: c.Said}
			}
			u := Usage{Input: c.Input, Output: c.Output}
			if u.Input == 0 {
				u.Input = estimateTokens(int(c.Sent))
			}
			if u.Output == 0 {
				u.Output = estimateTokens(int(c.Received))
			}
			_ = done(ctx, c.Start, Reply{Usage: u}, err)
		}, nil
	}
}
