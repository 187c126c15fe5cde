package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crewlet/hub/authority"
)

// How long a call may take. A third-party server that never answers must
// not hold its caller forever, nor the hub's shutdown: each call to one of
// its tools is bounded by its server's call timeout, and every call the
// hub routes ends when the hub starts to close, since closing an operator
// session waits for the calls in it.

// bounds derives a call's context: ended by the caller, by the hub's
// closing, and for a third-party tool by its server's call timeout.
func (r *Router) bounds(ctx context.Context, e Entry) (context.Context, time.Duration, context.CancelFunc) {
	var limit time.Duration
	var cancel context.CancelFunc
	if e.Source != SourceBuiltin && r.callTimeout != nil {
		limit = r.callTimeout(e.Source)
		ctx, cancel = context.WithTimeout(ctx, limit)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	if r.life == nil {
		return ctx, limit, cancel
	}
	stop := context.AfterFunc(r.life, cancel)
	return ctx, limit, func() { stop(); cancel() }
}

// cut says why a call whose context ended early was cut short, in the
// engine's words, when the hub cut it: its server's time ran out, or the
// hub is closing. A call its own caller gave up on is not answered here
// (nobody is waiting for the answer): nil then, as for a call that was not
// cut at all.
func (r *Router) cut(caller, call context.Context, e Entry, limit time.Duration) *authority.Refusal {
	if call.Err() == nil || caller.Err() != nil {
		return nil
	}
	data := map[string]any{}
	var sentence string
	switch {
	case r.life != nil && r.life.Err() != nil && e.Source != SourceBuiltin:
		// MCP-6: the engine stopping a server names it, what took it down
		// and when it comes back, as a crash does.
		server := serverOf(e.Source)
		sentence = fmt.Sprintf("The MCP server %q was stopped because the hub is shutting down; the hub stopped waiting for %q and told the server to cancel the call. "+
			"No restart is scheduled before the hub starts again.", server, e.Name)
		data["server"] = server
	case r.life != nil && r.life.Err() != nil:
		sentence = fmt.Sprintf("The hub is shutting down, so it stopped waiting for %q.", e.Name)
	case errors.Is(call.Err(), context.DeadlineExceeded):
		server := serverOf(e.Source)
		secs := int(limit.Round(time.Second).Seconds())
		sentence = fmt.Sprintf("The MCP server %q did not answer in %d s, so the hub stopped waiting and told it to cancel the call. "+
			"Try again later, or ask an administrator to raise its call_timeout_seconds if its calls are slow by nature.", server, secs)
		data["server"], data["timeout_seconds"] = server, secs
	default:
		return nil
	}
	ref := authority.Refuse(authority.Unavailable, "%s", sentence)
	for k, v := range data {
		ref = ref.WithData(k, v)
	}
	// Nothing says how far the server got.
	return mayHaveTakenEffect(ref, e.Hints)
}

// serverOf is the server a third-party source names.
func serverOf(src Source) string {
	s, _ := strings.CutPrefix(string(src), "mcp:")
	return s
}
