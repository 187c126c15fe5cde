package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// turn is one turn in flight: its record, who it calls as, the tool
// surface it started with, and what it has done so far. It is owned by
// its seat's mailbox goroutine.
type turn struct {
	r       *Runtime
	rec     TurnRecord
	caller  authority.Caller
	surface Surface
	model   Model
	spec    SeatSpec
	log     *slog.Logger

	// all is every tool of the surface by name; offered those the model
	// is shown this turn, by their name on the wire (see wireNames).
	all     map[string]Tool
	shown   []Tool
	offered map[string]Tool
	defs    []ToolDef
	// guards maps a tool to the tool skill that must be loaded first;
	// loaded are the skills loaded this turn.
	guards map[string]string
	loaded map[string]bool

	reached bool
	// usage is what the turn's model calls spent; usageMu guards its
	// sums, since a coding CLI's calls are charged from the gateway's
	// goroutines (they are over before the turn reads it).
	usageMu sync.Mutex
	usage   Usage
	rounds  int
	called  []string
	// steps are the turn's own calls that ran, for skill synthesis.
	steps []step

	// notes are what people steer the turn with (steer_turn).
	notes notes

	// runs are the coding runs the turn started (run_sandbox), whose
	// boxes it holds until it ends; boxMu guards it, since run_sandbox and
	// source.sandbox reach it from the calls' goroutines.
	boxMu sync.Mutex
	runs  []*codeRun
}

// delegateName is the tool a turn hands work to workers with. It is in no
// registry: each turn builds it, carrying that turn's grant (CAT-6).
const delegateName = "delegate"

// runTurn runs one turn to its end and records the end on the log. A
// turn cut short (the seat released, the node closing) records nothing:
// it stays running and is run again.
func (r *Runtime) runTurn(ctx context.Context, rec TurnRecord) {
	start := time.Now()
	log := r.log.With("seat", rec.Seat, "turn", rec.Key)
	log.Info("turn_started", "requester", rec.Requester, "about", rec.About, "feed", rec.Feed)
	t := &turn{r: r, rec: rec, caller: seatCaller(rec), log: log, loaded: map[string]bool{}}
	t.notes.open = true
	seatKey := strings.ToLower(rec.Seat)
	r.mu.Lock()
	r.running[seatKey] = t
	r.mu.Unlock()
	outcome, reason, account := t.run(ctx)
	r.mu.Lock()
	delete(r.running, seatKey)
	r.mu.Unlock()
	// The Execute phase is over: its boxes go, but a parked run's.
	t.closeRuns()
	if left := t.notes.close(); left > 0 {
		log.Warn("turn_notes_unread", "notes", left, "reason", "the turn ended before another model round could read them")
	}
	if ctx.Err() != nil {
		log.Info("turn_cut", "reason", "the seat was let go or the node is stopping; the turn runs again where the seat is held next")
		return
	}
	// The reason quotes whatever failed, so it alone is clipped to what an
	// entry of the log carries; the node's log below has it whole.
	end := endPayload{Key: rec.Key, Outcome: outcome, Delivered: outcome == Delivered, Reason: state.ClipDiagnostic(reason), Account: account,
		Rounds: t.rounds, Usage: t.usage, Tools: t.called}
	// The turn is over: its end is recorded even if the seat is let go
	// this instant, or the turn would run again for nothing.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := r.opts.Store.write(wctx, t.caller, rec.Key, rec.Woken, kindEnded, map[string]string{"turn": rec.Key}, end); err != nil {
		log.Error("turn_end_not_recorded", "error", err.Error())
	}
	if outcome != Delivered {
		for _, f := range r.opts.Feeds {
			if f.Name == rec.Feed && f.Ended != nil {
				ended := rec
				ended.Outcome, ended.Reason = outcome, end.Reason
				if err := f.Ended(wctx, ended); err != nil {
					log.Warn("turn_end_not_noted", "feed", f.Name, "error", err.Error())
				}
			}
		}
	}
	r.opts.Observer.TurnEnded(outcome, time.Since(start))
	// Logged last, once everything about the end is recorded.
	attrs := []any{"outcome", outcome, "delivered", outcome == Delivered, "rounds", t.rounds,
		"input_tokens", t.usage.Input, "output_tokens", t.usage.Output, "tools", len(t.called)}
	if reason != "" {
		attrs = append(attrs, "reason", reason)
	}
	if outcome == Delivered {
		log.Info("turn_ended", attrs...)
	} else {
		log.Warn("turn_ended", attrs...)
	}
	t.synthesize(ctx, outcome, account)
	// The first turn to end after a month closed compacts it.
	r.compactEpisodes(ctx, rec.Seat)
}

// run is the turn loop. It answers the outcome, why (for any outcome but
// delivered) and the model's last text.
func (t *turn) run(ctx context.Context) (outcome, reason, account string) {
	spec, ok, err := t.r.opts.Seat(t.rec.Seat)
	switch {
	case err != nil:
		return NotRun, fmt.Sprintf("The seat's model could not be resolved: %v.", err), ""
	case !ok:
		return NotRun, "The seat has no model: set a model on its role or models.default in the company file.", ""
	}
	t.spec = spec
	if t.model, err = t.r.models.get(spec.Model); err != nil {
		return NotRun, fmt.Sprintf("The seat's model cannot be used: %v.", err), ""
	}
	t.surface = t.r.opts.Hub.Surface(t.rec.Seat)
	t.offer()
	opening := t.opening()
	if onboarded := t.onboard(ctx); onboarded != "" {
		opening += "\n\n" + onboarded
	}
	if recalled := t.prefetch(ctx); recalled != "" {
		opening += "\n\n" + recalled
	}
	msgs := []Message{{From: FromUser, Text: opening}}
	system := t.system()
	reminded := false
	for t.rounds < t.r.opts.MaxRounds {
		// Notes people steered the turn with are read now; the box stays
		// open only while another round follows this one.
		if note := t.notes.read(t.rounds+1 < t.r.opts.MaxRounds); note != "" {
			msgs = append(msgs, Message{From: FromUser, Text: note})
		}
		rep, refusal, err := t.ask(ctx, Request{System: system, Messages: msgs, Tools: t.defs}, false)
		if refusal != nil {
			// Only a ceiling with no room is budget_exhausted; a budget
			// that could not be decided (a fleet's counters out of
			// reach) is a failure to run, said in its own sentence.
			if refusal.Class != authority.BudgetExhausted {
				return Failed, refusal.Sentence, account
			}
			return BudgetExhausted, refusal.Sentence, account
		}
		if err != nil {
			// The reason is the hub's own sentence (modelFailure): which
			// endpoint, what failed, what mends it.
			return Failed, err.Error() + " Once that is mended, wake the seat again: a new mention runs a new turn.", account
		}
		msgs = append(msgs, Message{From: FromModel, Text: rep.Text, Calls: rep.Calls})
		if strings.TrimSpace(rep.Text) != "" {
			account = rep.Text
		}
		if len(rep.Calls) == 0 {
			if t.notes.unread() {
				// A note came while the model answered: the turn reads
				// it before it ends.
				continue
			}
			if t.delivered(account) {
				return Delivered, "", account
			}
			if !reminded {
				// The delivery fence (BLT-3, WR-9): told once, one more
				// round to reach somebody.
				reminded = true
				t.log.Info("turn_reminded", "reason", "about to end having reached nobody")
				msgs = append(msgs, Message{From: FromUser, Text: undeliveredReminder})
				continue
			}
			return Undelivered, "The turn ended having reached nobody, after one reminder: it called no tool that delivers and none whose hints are unknown.", account
		}
		results := make([]ToolResult, 0, len(rep.Calls))
		for _, c := range rep.Calls {
			if ctx.Err() != nil {
				return Failed, "cut", account
			}
			results = append(results, t.call(ctx, c, t.offered, false))
		}
		msgs = append(msgs, Message{From: FromTools, Results: results})
	}
	why := fmt.Sprintf("The turn reached its cap of %d model rounds.", t.r.opts.MaxRounds)
	if t.delivered(account) {
		return Delivered, why, account
	}
	return Undelivered, why + " It had reached nobody.", account
}

// undeliveredReminder is the fence's one reminder.
const undeliveredReminder = "Before you stop: nothing you did this turn reached anybody. Reading and searching change nothing " +
	"anyone sees, so the person who woke you has no answer yet. If you have something to say or hand over, say it where " +
	"they will see it now (for a work item, comment on it). This is the only reminder; if you end again without reaching " +
	"anyone, the turn is recorded as undelivered."

// delivered reports whether the turn reached anybody. A turn woken by a
// colleague's a2a_ask reaches its asker with its answer.
func (t *turn) delivered(account string) bool {
	return t.reached || (t.rec.Feed == A2AFeedName && strings.TrimSpace(account) != "")
}

// ask makes one model call under the budget: refused before anything is
// sent when a ceiling has no room.
func (t *turn) ask(ctx context.Context, req Request, worker bool) (Reply, *authority.Refusal, error) {
	done, refusal := t.charge(estimateRequest(req), "worker", worker)
	if refusal != nil {
		return Reply{}, refusal, nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.r.opts.ModelTimeout)
	defer cancel()
	start := time.Now()
	rep, err := t.model.Complete(cctx, req)
	if err := done(ctx, start, rep, err); err != nil {
		return Reply{}, nil, err
	}
	t.rounds++
	return rep, nil, nil
}

// charge holds one model call of the seat's to its budget and telemetry:
// the one path every model call a turn makes is charged through — its own
// rounds, its workers', its coding runs' and a coding CLI's through the
// box's model gateway (cliMeter). About need tokens are reserved before
// anything is sent, and the call is refused when a ceiling has no room;
// else done settles the call with what it spent, counts it as the turn's,
// tells telemetry and the node's log (attrs say whose call it was), and
// answers the error a failed call ends with. done may be called from
// another goroutine than the turn's.
func (t *turn) charge(need int64, attrs ...any) (done func(ctx context.Context, start time.Time, rep Reply, err error) error, refusal *authority.Refusal) {
	settle, refusal := t.r.opts.Budget.Reserve(t.rec.Seat, need)
	if refusal != nil {
		t.log.Warn("model_call_refused", append([]any{"class", string(refusal.Class), "reason", refusal.Sentence}, attrs...)...)
		return nil, refusal
	}
	return func(ctx context.Context, start time.Time, rep Reply, err error) error {
		if err := modelCalled(t.r.opts.Observer, ctx, t.spec.Model, t.r.opts.ModelTimeout, start, rep, err); err != nil {
			settle(Usage{})
			t.log.Warn("model_call_failed", append([]any{"model", t.model.Name(), "ms", time.Since(start).Milliseconds(),
				"reason", err.Error(), "error", errors.Unwrap(err).Error()}, attrs...)...)
			return err
		}
		settle(rep.Usage)
		t.usageMu.Lock()
		t.usage = t.usage.Add(rep.Usage)
		t.usageMu.Unlock()
		t.log.Info("model_called", append([]any{"model", t.model.Name(), "input_tokens", rep.Usage.Input, "output_tokens", rep.Usage.Output,
			"tool_calls", len(rep.Calls), "ms", time.Since(start).Milliseconds()}, attrs...)...)
		return nil
	}, nil
}

// offer builds the tools the model is shown this turn from the frozen
// surface: the seat's own first, then the company's, then delegate.
// mark_onboarded is offered only to the onboarding pass (onboard), and a
// turn that answers a colleague's a2a_ask may not ask another in turn (a
// chain of seats waiting on each other).
func (t *turn) offer() {
	tools := t.surface.Tools()
	t.all = make(map[string]Tool, len(tools))
	var shown []Tool
	for _, tool := range tools {
		t.all[tool.Name] = tool
		switch {
		case tool.Name == delegateName:
			t.log.Warn("tool_shadowed", "tool", tool.Name, "source", tool.Source, "reason", "delegate is the turn's own")
			continue
		case tool.Name == "mark_onboarded":
			continue
		case tool.Name == "a2a_ask" && t.rec.Feed == A2AFeedName:
			continue
		}
		shown = append(shown, tool)
	}
	shown = append(shown, t.delegateTool())
	t.shown = shown
	t.offered, t.defs = wireNames(shown)
	t.guards = map[string]string{}
	if _, ok := t.all["load_tool_skill"]; ok {
		for _, s := range t.r.opts.ToolSkills {
			for _, g := range s.Guards {
				t.guards[g] = s.Key
			}
		}
	}
}

// wireNames names each tool as a model may call it (letters, digits, _
// and -, at most 64), keeping names that already are; two tools that
// would share a name get a numbered one.
func wireNames(tools []Tool) (map[string]Tool, []ToolDef) {
	byWire := make(map[string]Tool, len(tools))
	defs := make([]ToolDef, 0, len(tools))
	for _, tool := range tools {
		name := wireName(tool.Name)
		for i := 2; ; i++ {
			if _, taken := byWire[name]; !taken {
				break
			}
			suffix := fmt.Sprintf("_%d", i)
			name = wireName(tool.Name)[:min(len(wireName(tool.Name)), 64-len(suffix))] + suffix
		}
		byWire[name] = tool
		defs = append(defs, ToolDef{Name: name, Description: tool.Description, Schema: tool.Schema})
	}
	return byWire, defs
}

func wireName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// call runs one tool call the model asked for, among the tools offered
// (by wire name), and answers its result in full. Everything refused here
// is refused before any tool runs (REF-5).
func (t *turn) call(ctx context.Context, c ToolCall, offeredSet map[string]Tool, worker bool) ToolResult {
	start := time.Now()
	tool, offered := offeredSet[c.Name]
	name := c.Name
	if offered {
		name = tool.Name
	}
	var res *mcp.CallToolResult
	refusal := t.decide(c.Name, tool, offered, worker)
	switch {
	case refusal != nil:
		res = servers.Refused(refusal)
	case offered && name == delegateName:
		return t.delegate(ctx, c)
	default:
		res = t.surface.Call(ctx, t.caller, name, argsOrEmpty(c.Args))
	}
	class, _ := servers.ClassOf(res)
	if offered && refusal == nil {
		if name == "load_tool_skill" && !res.IsError {
			var in struct {
				Key string `json:"key"`
			}
			if json.Unmarshal(c.Args, &in) == nil {
				t.loaded[strings.ToLower(strings.TrimSpace(in.Key))] = true
			}
		}
		if !worker && tool.Reaches() && mayHaveActed(res) {
			t.reached = true
		}
	}
	t.called = append(t.called, name)
	if offered && refusal == nil && !worker {
		t.steps = append(t.steps, step{Tool: name, Args: argsOrEmpty(c.Args), Failed: res.IsError})
	}
	t.log.Info("tool_called", "tool", name, "source", tool.Source, "class", behaviour(tool, offered), "delivers", tool.Delivers,
		"is_error", res.IsError, "refusal", string(class), "us", time.Since(start).Microseconds(), "worker", worker)
	return ToolResult{CallID: c.ID, Text: resultText(res), IsError: res.IsError}
}

// decide refuses a call before it runs: a tool of the surface this turn
// does not offer, one a tool skill guards until the skill is loaded, and
// for a worker, anything not proven read-only. A name the surface does not
// have goes to the router, which answers not_found (or forbidden for a
// tool another seat holds).
func (t *turn) decide(wire string, tool Tool, offered, worker bool) *authority.Refusal {
	if worker {
		// The worker guard (BLT-3): only what hints prove read-only, and
		// unknown is not proven (CAT-7).
		if real, ok := t.all[wire]; ok {
			tool, offered = real, true
		}
		if !offered {
			return nil
		}
		if !tool.ProvenReadOnly() {
			return authority.Refuse(authority.Forbidden,
				"A worker may call only tools whose hints prove them read-only, and %q is not (read_only: %s); hand what you found back, and the turn that delegated to you decides what to do with it.",
				tool.Name, tool.Hints.ReadOnly)
		}
		return nil
	}
	if !offered {
		if real, ok := t.all[wire]; ok {
			return authority.Refuse(authority.Forbidden, "The tool %q is not offered in this turn.", real.Name)
		}
		return nil
	}
	if skill, guarded := t.guards[tool.Name]; guarded && !t.loaded[skill] {
		return authority.Refuse(authority.Forbidden,
			"%q is held back until you load its tool skill: call load_tool_skill with key %q first, then follow it.", tool.Name, skill)
	}
	return nil
}

// mayHaveActed reports whether a call may have put something in front of
// somebody: it succeeded, failed in a server's own words (which may have
// acted), or may have taken effect. A call refused before it ran did not.
func mayHaveActed(res *mcp.CallToolResult) bool {
	if !res.IsError {
		return true
	}
	if _, classed := servers.ClassOf(res); !classed {
		return true
	}
	data := refusalData(res)
	return data["may_have_taken_effect"] == true || data["outcome"] == "unknown"
}

// refusalData reads the data a refusal carries beside its sentence.
func refusalData(res *mcp.CallToolResult) map[string]any {
	var body struct {
		Data map[string]any `json:"data"`
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		_ = json.Unmarshal(b, &body)
	}
	return body.Data
}

// resultText is a result as the model reads it: its text in full (OUT-1),
// other content described, and a refusal's class before its sentence.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[an image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[a link to %s]", c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[a resource, %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob)))
			}
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			text = string(b)
		}
	}
	if res.IsError {
		if class, ok := servers.ClassOf(res); ok {
			return "Refused (" + string(class) + "): " + text
		}
		return "The tool failed: " + text
	}
	return text
}

// behaviour classes a tool for the events: what its hints and delivery
// say a call of it does.
func behaviour(tool Tool, offered bool) string {
	switch {
	case !offered:
		return "unoffered"
	case tool.Delivers != "":
		return "delivery"
	case tool.Hints.ReadOnly == servers.Yes:
		return "read"
	case tool.Hints.ReadOnly == servers.No:
		return "write"
	}
	return "unknown"
}
