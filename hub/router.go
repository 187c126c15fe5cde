package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Router decides and routes tool calls.
type Router struct {
	company *Catalogue
	// seats lists every seat's own catalogue, so a tool held by another seat
	// is told apart from a name nothing registered.
	seats func() []*Catalogue
	clean *sanitize.Sanitizer
	log   *slog.Logger
	// callTimeout is how long a call to a third-party tool of a source may
	// take (call_timeout_seconds of the revision in force); nil, no bound.
	callTimeout func(Source) time.Duration
	// life ends when the hub starts to close; every call ends with it.
	life context.Context
	// observe is told of every call routed (metrics, traces).
	observe CallObserver
	// seal binds the requestState of an answer asking a 2026-07-28 client
	// for input to that client's follow-up (input_rounds.go).
	seal stateSeal
}

// Call decides a call against what reg offers, runs it and sanitises the
// answer. It always answers a result: a refusal is a failed result carrying a
// class (REF-1), never a protocol error.
func (r *Router) Call(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	a, _ := r.call(ctx, reg, caller, name, args)
	return r.decoded(ctx, name, a)
}

// CallForPerson is Call on a person's surface: failures that carry no class
// are answered as internal_error (REF-6).
func (r *Router) CallForPerson(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	return r.decoded(ctx, name, r.callForPerson(ctx, reg, caller, name, args))
}

// answer is what a routed call comes to: a success sanitised in one pass
// over the JSON its server wrote (onePass set, res nil), or a result the
// hub wrote or had to decode (refusals and failures always are). A caller
// that writes JSON writes either as it is; one that wants the SDK's types
// decodes a one-pass answer once (decoded).
type answer struct {
	res     *mcp.CallToolResult
	onePass *sanitize.OnePass
}

// callForPerson is the one route of a person's call, whichever surface
// carries it (/operator/mcp, /operator/act): the decisions, refusals and
// sanitising rules of call, and failures that carry no class answered as
// internal_error (REF-6).
func (r *Router) callForPerson(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) answer {
	a, src := r.call(ctx, reg, caller, name, args)
	if a.res != nil {
		a.res = forPerson(ctx, r.log, src, a.res)
	}
	return a
}

// decoded is an answer as the SDK's result type. A one-pass answer is JSON
// the SDK's client decodes (the sanitiser writes nothing else); one that
// would not decode is the hub's fault, said as internal_error.
func (r *Router) decoded(ctx context.Context, name string, a answer) *mcp.CallToolResult {
	if a.onePass == nil {
		return a.res
	}
	res := new(mcp.CallToolResult)
	if err := json.Unmarshal(a.onePass.AppendJSON(nil), res); err != nil {
		r.log.ErrorContext(ctx, "tool_answer_undecodable", "tool", name, "error", err.Error())
		return servers.Refused(authority.Internal())
	}
	return res
}

// rawBackend is a backend that can answer a call as the JSON text of its
// result, for the one pass. It answers raw, or, where it had to decode the
// result itself, res.
type rawBackend interface {
	CallRaw(ctx context.Context, caller authority.Caller, tool string, args json.RawMessage) (raw json.RawMessage, res *mcp.CallToolResult, err error)
}

func (r *Router) call(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) (a answer, src Source) {
	// A success answered in one pass has no decoded result: the observer
	// is told of it as a success (res nil), as it is.
	ctx, observed := r.observe.CallStarted(ctx, name)
	defer func() { observed(src, a.res) }()
	start := time.Now()
	e, ok := reg.Resolve(name)
	if ok && e.Quarantine != nil {
		// Issue 28: a held tool is refused before anything reaches its
		// server, saying who must approve it and where.
		return r.refuse(ctx, name, caller, e.Quarantine.refusal), e.Source
	}
	if !ok {
		// REF-5: decided before any tool runs.
		if r.registered(name) {
			return r.refuse(ctx, name, caller, authority.Refuse(authority.Forbidden,
				"The tool %q exists but is not offered to you here; ask an administrator if you need it.", name)), ""
		}
		return r.refuse(ctx, name, caller, authority.Refuse(authority.NotFound,
			"No tool called %q is registered; list the tools to see what there is.", name)), ""
	}
	if e.Source != SourceBuiltin {
		// First-party tools apply the kit's rule themselves; a third-party
		// server would take a control character and answer it back as
		// binary, which the sanitiser rejects (OUT-1): it is refused here,
		// before anything is sent, in the kit's words.
		if ref := servers.CheckArgumentText(args); ref != nil {
			return r.refuse(ctx, name, caller, ref), e.Source
		}
	}
	round, takesInput := clientRoundFrom(ctx)
	if takesInput {
		// A client on 2026-07-28 answers a server's input requests in a
		// call of its own: what it brings back is checked here, after the
		// call was decided as any call is, and before anything is sent.
		rounds, ref := r.roundIn(caller, e, args, round)
		if ref != nil {
			return r.refuse(ctx, name, caller, ref), e.Source
		}
		ctx = upstream.WithClientRounds(ctx, rounds)
	}
	callCtx, limit, cancel := r.bounds(ctx, e)
	var raw json.RawMessage
	var res *mcp.CallToolResult
	var err error
	// A backend that can answer the JSON its server wrote always does, on
	// every route: one link carries a third-party call whoever asked, and
	// what the one pass does not take is decoded below, once.
	if rb, ok := e.backend.(rawBackend); ok {
		raw, res, err = rb.CallRaw(callCtx, caller, e.upstream, args)
	} else {
		res, err = e.backend.Call(callCtx, caller, e.upstream, args)
	}
	var cutShort *authority.Refusal
	if err != nil {
		cutShort = r.cut(ctx, callCtx, e, limit)
	}
	cancel()
	if cutShort != nil {
		r.log.WarnContext(ctx, "tool_call_cut", "tool", name, "source", string(e.Source), "seat", caller.Seat, "reason", cutShort.Sentence)
		return r.refuse(ctx, name, caller, cutShort), e.Source
	}
	if down, ok := asDown(err); ok {
		r.log.InfoContext(ctx, "tool_refused_server_down", "tool", name, "server", down.Server, "cause", down.Cause, "in_flight", down.InFlight)
		ref := downRefusal(down, e.Hints)
		// The cause is the engine's account of a server's failure, which
		// can quote what the server was started with: it is sanitised
		// like any result.
		if clean, err := r.clean.Text(ref.Sentence); err == nil {
			ref.Sentence = clean
		}
		return r.refuse(ctx, name, caller, ref), e.Source
	}
	var cutOff *upstream.CutError
	if errors.As(err, &cutOff) {
		r.log.InfoContext(ctx, "tool_answer_cut", "tool", name, "server", cutOff.Server)
		return r.refuse(ctx, name, caller, cutRefusal(cutOff, name, e.Hints)), e.Source
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && e.Source != SourceBuiltin {
		// The server answered, with a protocol error of its own (bad
		// arguments, a tool it does not know): its failure, in its words,
		// carrying no class (REF-6). A person's surface marks it
		// internal_error; nobody is told to wait for it to clear.
		msg, cerr := r.clean.Text(wire.Message)
		if cerr != nil {
			msg = "the server's error message held binary data"
		}
		return answer{res: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}}, e.Source
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up (a client that hung up): nobody reads the
		// answer, and a stranger hanging up at will is no warning.
		r.log.DebugContext(ctx, "tool_call_abandoned", "tool", name, "source", string(e.Source), "seat", caller.Seat)
		return r.refuse(ctx, name, caller, authority.Refuse(authority.Unavailable,
			"The call to %q was cancelled by its caller before an answer came back.", name)), e.Source
	}
	if err == nil && raw != nil {
		op, serr := r.clean.ResultOnePass(raw, nil)
		switch {
		case errors.Is(serr, sanitize.ErrMalformed):
			// Issue 25 defect 5: the server answered, with a result no
			// client can read (a member of the wrong type, nesting past
			// any decoder's bound): its failure, never a condition a
			// retry clears.
			r.log.WarnContext(ctx, "server_answer_unreadable", "tool", name, "source", string(e.Source), "reason", serr.Error())
			unreadable := &upstream.UnreadableError{Server: strings.TrimPrefix(string(e.Source), "mcp:"),
				Why: "a result whose members are not of the types the protocol gives them"}
			return answer{res: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: unreadable.Error()}}}}, e.Source
		case serr != nil:
			return r.rejected(ctx, name, e.Source, caller, start, serr), e.Source
		case takesInput && !op.IsError && upstream.AsksForInput(raw):
			// The server asks the client for input (SEP-2322): the
			// client gets its requests, sanitised, and the hub's sealed
			// state in place of the server's.
			if err := r.roundOut(caller, e, args, raw, &op); err != nil {
				r.log.ErrorContext(ctx, "input_round_unsealable", "tool", name, "error", err.Error())
				return answer{res: servers.Refused(authority.Internal())}, e.Source
			}
			r.called(ctx, name, e.Source, caller, start, false, "")
			return answer{onePass: &op}, e.Source
		case !op.IsError:
			r.called(ctx, name, e.Source, caller, start, false, "")
			return answer{onePass: &op}, e.Source
		}
		// A failure is read as the SDK's type, small and rare: a
		// person's surface gives it a class (forPerson) if it has none.
		res = new(mcp.CallToolResult)
		if derr := json.Unmarshal(op.AppendJSON(nil), res); derr != nil {
			r.log.ErrorContext(ctx, "tool_answer_undecodable", "tool", name, "error", derr.Error())
			return answer{res: servers.Refused(authority.Internal())}, e.Source
		}
		r.called(ctx, name, e.Source, caller, start, true, "")
		return answer{res: res}, e.Source
	}
	if err != nil {
		// The engine's words, never the transport's: the cause is logged.
		r.log.WarnContext(ctx, "tool_call_failed", "tool", name, "source", string(e.Source), "seat", caller.Seat, "error", err.Error())
		return r.refuse(ctx, name, caller, authority.Refuse(authority.Unavailable,
			"The server behind %q could not take the call right now; nothing came back from it. Retry shortly.", name)), e.Source
	}
	if e.Source == SourceBuiltin {
		if op, ok := firstPartyOnePass(r.clean, res); ok {
			r.called(ctx, name, e.Source, caller, start, false, "")
			return answer{onePass: &op}, e.Source
		}
	}
	var clean *mcp.CallToolResult
	if e.Source == SourceBuiltin {
		clean, err = firstPartyResult(r.clean, res)
	} else {
		clean, err = r.clean.Result(res)
	}
	if err != nil {
		return r.rejected(ctx, name, e.Source, caller, start, err), e.Source
	}
	class, _ := servers.ClassOf(clean)
	r.called(ctx, name, e.Source, caller, start, clean.IsError, class)
	return answer{res: clean}, e.Source
}

// rejected answers a result the sanitiser refused (OUT-1): binary posing as
// text is rejected with a sentence, never repaired or cut. It is the
// server's failure, so it carries no class.
func (r *Router) rejected(ctx context.Context, name string, src Source, caller authority.Caller, start time.Time, err error) answer {
	r.log.WarnContext(ctx, "tool_result_rejected", "tool", name, "source", string(src), "reason", err.Error())
	r.called(ctx, name, src, caller, start, true, "")
	return answer{res: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}}
}

// called notes a call that ran, at debug level.
func (r *Router) called(ctx context.Context, name string, src Source, caller authority.Caller, start time.Time, isError bool, class authority.Class) {
	if !r.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	r.log.DebugContext(ctx, "tool_called", "tool", name, "source", string(src), "seat", caller.Seat,
		"is_error", isError, "class", string(class), "ms", time.Since(start).Milliseconds())
}

// firstPartyOnePass is firstPartyResult in one pass, for a success as the
// servers kit answers it: the output as structured content, written as JSON
// text once more. Anything else is left to firstPartyResult.
func firstPartyOnePass(s *sanitize.Sanitizer, res *mcp.CallToolResult) (sanitize.OnePass, bool) {
	body, ok := res.StructuredContent.(json.RawMessage)
	if !ok || res.IsError || len(res.Meta) > 0 || len(res.Content) != 1 {
		return sanitize.OnePass{}, false
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Meta != nil || tc.Annotations != nil || tc.Text != string(body) {
		return sanitize.OnePass{}, false
	}
	clean, ok := s.JSONOnePass(body, servers.Refence)
	if !ok {
		return sanitize.OnePass{}, false
	}
	// Escaped, the JSON's quotes double: in a page of short fields about
	// one byte in six is one.
	content := make([]byte, 0, len(clean)+len(clean)/4+32)
	content = append(content, `[{"type":"text","text":`...)
	content = sanitize.AppendJSONString(content, clean)
	content = append(content, "}]"...)
	return sanitize.OnePass{Content: content, Structured: clean}, true
}

// firstPartyResult sanitises a first-party server's result. Its fences are
// digests of the text they wrap, so where the sanitiser changed that text
// (a control character stripped, a secret redacted) they are re-issued over
// the text as changed: sent back, it is stored once, unfenced (WR-10). A
// first-party success's text is the JSON of its structured content, so it
// is written again from the sanitised structured content, fences and all.
func firstPartyResult(s *sanitize.Sanitizer, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	clean, err := s.ResultWith(res, servers.Refence)
	if err != nil || clean.IsError || clean.StructuredContent == nil {
		return clean, err
	}
	body, err := json.Marshal(clean.StructuredContent)
	if err != nil {
		return nil, err
	}
	clean.Content = []mcp.Content{&mcp.TextContent{Text: string(body)}}
	return clean, nil
}

// registered reports whether any registry the hub holds has the name.
func (r *Router) registered(name string) bool {
	if _, ok := r.company.Get(name); ok {
		return true
	}
	if r.seats != nil {
		for _, c := range r.seats() {
			if _, ok := c.Get(name); ok {
				return true
			}
		}
	}
	return false
}

func (r *Router) refuse(ctx context.Context, tool string, caller authority.Caller, ref *authority.Refusal) answer {
	r.log.DebugContext(ctx, "tool_refused", "tool", tool, "seat", caller.Seat, "class", string(ref.Class))
	return answer{res: servers.Refused(ref)}
}

// forPerson readies a result for a person's surface (REF-6): a failure that
// carries no class is answered as internal_error, since neither a server's
// own failure nor an unclassed first-party one has a remedy the caller can
// apply. A first-party tool's unclassed text is replaced by the fixed
// sentence; a third-party server's prose is its own and is kept.
func forPerson(ctx context.Context, log *slog.Logger, src Source, res *mcp.CallToolResult) *mcp.CallToolResult {
	if !res.IsError {
		return res
	}
	if _, ok := servers.ClassOf(res); ok {
		return res
	}
	if src == SourceBuiltin {
		log.ErrorContext(ctx, "builtin_failed_unclassed", "detail", textOf(res))
		return servers.Refused(authority.Internal())
	}
	out := *res
	out.Meta = mcp.Meta{}
	for k, v := range res.Meta {
		out.Meta[k] = v
	}
	out.Meta[servers.MetaRefusal] = string(authority.InternalError)
	return &out
}

func textOf(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// downRefusal says, in the engine's words, that a server is down (MCP-6):
// which server, what took it down, when the next restart is, and, for a call
// that was in flight on a tool not known to be read-only, that it may have
// taken effect.
func downRefusal(e *upstream.DownError, hints servers.Hints) *authority.Refusal {
	var b strings.Builder
	fmt.Fprintf(&b, "The MCP server %q is not running: %s.", e.Server, e.Cause)
	switch {
	case e.NextRestart.IsZero():
		b.WriteString(" No restart is scheduled.")
	case time.Until(e.NextRestart) <= time.Second:
		b.WriteString(" It is being restarted now; try again in a moment.")
	default:
		fmt.Fprintf(&b, " Its next restart is in %s.", time.Until(e.NextRestart).Round(time.Second))
	}
	r := authority.Refuse(authority.Unavailable, "%s", b.String()).WithData("server", e.Server)
	if !e.InFlight {
		return r
	}
	return mayHaveTakenEffect(r, hints)
}

// cutRefusal says, in the engine's words, that a call's answer was cut off
// on its way back (REF-6: unavailable): which server, that only the
// connection that carried the answer broke, its session with the hub
// still open (no restart is due, so none is spoken of), and, unless the
// tool is read-only, that the call may have taken effect, since it reached
// the server.
func cutRefusal(e *upstream.CutError, tool string, hints servers.Hints) *authority.Refusal {
	r := authority.Refuse(authority.Unavailable,
		"The answer of the MCP server %q to %q was cut off on its way back: the connection that carried it broke before the answer was whole. "+
			"The hub's session with the server is still open.", e.Server, tool).WithData("server", e.Server)
	return mayHaveTakenEffect(r, hints)
}

// mayHaveTakenEffect marks the refusal of a call that reached its server
// and got no whole answer back: unless its tool is known to change
// nothing, it may have taken effect (MCP-6), which the sentence and the
// data say, so a caller checks before repeating it.
func mayHaveTakenEffect(r *authority.Refusal, hints servers.Hints) *authority.Refusal {
	if hints.ReadOnly == servers.Yes {
		return r
	}
	r = r.WithData("may_have_taken_effect", true)
	r.Sentence += " The call had been sent and no answer came back, so it may have taken effect: check before repeating it."
	return r
}

func asDown(err error) (*upstream.DownError, bool) {
	var d *upstream.DownError
	ok := errors.As(err, &d)
	return d, ok
}
