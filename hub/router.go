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
}

// Call decides a call against what reg offers, runs it and sanitises the
// answer. It always answers a result: a refusal is a failed result carrying a
// class (REF-1), never a protocol error.
func (r *Router) Call(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	res, _ := r.call(ctx, reg, caller, name, args)
	return res
}

// CallForPerson is Call on a person's surface: failures that carry no class
// are answered as internal_error (REF-6).
func (r *Router) CallForPerson(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	res, src := r.call(ctx, reg, caller, name, args)
	return forPerson(ctx, r.log, src, res)
}

func (r *Router) call(ctx context.Context, reg Registry, caller authority.Caller, name string, args json.RawMessage) (res *mcp.CallToolResult, src Source) {
	ctx, observed := r.observe.CallStarted(ctx, name)
	defer func() { observed(src, res) }()
	start := time.Now()
	e, ok := reg.Resolve(name)
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
	callCtx, limit, cancel := r.bounds(ctx, e)
	res, err := e.backend.Call(callCtx, caller, e.upstream, args)
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
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, e.Source
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up (a client that hung up): nobody reads the
		// answer, and a stranger hanging up at will is no warning.
		r.log.DebugContext(ctx, "tool_call_abandoned", "tool", name, "source", string(e.Source), "seat", caller.Seat)
		return r.refuse(ctx, name, caller, authority.Refuse(authority.Unavailable,
			"The call to %q was cancelled by its caller before an answer came back.", name)), e.Source
	}
	if err != nil {
		// The engine's words, never the transport's: the cause is logged.
		r.log.WarnContext(ctx, "tool_call_failed", "tool", name, "source", string(e.Source), "seat", caller.Seat, "error", err.Error())
		return r.refuse(ctx, name, caller, authority.Refuse(authority.Unavailable,
			"The server behind %q could not take the call right now; nothing came back from it. Retry shortly.", name)), e.Source
	}
	res = withoutProtocolMeta(res)
	var clean *mcp.CallToolResult
	if e.Source == SourceBuiltin {
		clean, err = firstPartyResult(r.clean, res)
	} else {
		clean, err = r.clean.Result(res)
	}
	if err != nil {
		// OUT-1: binary posing as text is rejected with a sentence, never
		// repaired or cut. It is the server's failure, so it carries no class.
		r.log.WarnContext(ctx, "tool_result_rejected", "tool", name, "source", string(e.Source), "reason", err.Error())
		clean = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
	}
	class, _ := servers.ClassOf(clean)
	r.log.DebugContext(ctx, "tool_called", "tool", name, "source", string(e.Source), "seat", caller.Seat,
		"is_error", clean.IsError, "class", string(class), "ms", time.Since(start).Milliseconds())
	return clean, e.Source
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

func (r *Router) refuse(ctx context.Context, tool string, caller authority.Caller, ref *authority.Refusal) *mcp.CallToolResult {
	r.log.DebugContext(ctx, "tool_refused", "tool", tool, "seat", caller.Seat, "class", string(ref.Class))
	return servers.Refused(ref)
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

// withoutProtocolMeta drops the metadata keys the protocol reserves
// (io.modelcontextprotocol/...): they describe the hop the result arrived
// on, such as the inner server's identity, and the hub's own front sets its
// own for the hop to the caller.
func withoutProtocolMeta(res *mcp.CallToolResult) *mcp.CallToolResult {
	reserved := false
	for k := range res.Meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			reserved = true
		}
	}
	if !reserved {
		return res
	}
	out := *res
	out.Meta = mcp.Meta{}
	for k, v := range res.Meta {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			out.Meta[k] = v
		}
	}
	return &out
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
	mayHave := e.InFlight && hints.ReadOnly != servers.Yes
	if mayHave {
		b.WriteString(" The call had been sent and no answer came back, so it may have taken effect: check before repeating it.")
	}
	r := authority.Refuse(authority.Unavailable, "%s", b.String()).WithData("server", e.Server)
	if mayHave {
		r = r.WithData("may_have_taken_effect", true)
	}
	return r
}

func asDown(err error) (*upstream.DownError, bool) {
	var d *upstream.DownError
	ok := errors.As(err, &d)
	return d, ok
}
