package hub

import (
	"context"
	"net/http"

	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Metrics and traces watch the hub through the seams in this file and
// nothing else: the router tells a CallObserver of each call it routes, and
// supervision tells a ServerObserver of each state an instance moves to.
// The hub knows no metrics or tracing library; hub/metrics and hub/tracing
// implement these, and the node wires them (hub/serve).

// CallObserver is told of every tool call the router decides, once, from
// the router's own goroutine for that call.
type CallObserver interface {
	// CallStarted is told before the call is decided. The context it
	// returns is the one the call runs in, so a span it opens there is the
	// parent of the upstream hop's. done is called exactly once, when the
	// answer is known.
	CallStarted(ctx context.Context, tool string) (context.Context, CallDone)
}

// CallDone is told how a call ended: the source of the tool it resolved to
// (empty when the name resolved to nothing offered) and the result as the
// router answers it, a refusal's class in it.
type CallDone func(src Source, res *mcp.CallToolResult)

// ServerObserver is told each time an instance of a third-party server
// changes state or cause: seat is empty for a shared server's instance.
// It is called from the instance's own goroutine and must not block.
type ServerObserver interface {
	ServerStatus(server, seat string, prev, now upstream.Status)
}

// Observers are what watches the hub; a nil field watches nothing.
type Observers struct {
	Calls   CallObserver
	Servers ServerObserver
	// Hops is told of every call sent to a third-party server.
	Hops upstream.HopObserver
}

// CallObservers tells each of obs of every call, in order: the context
// the first returns is given to the second, so a span one opens is seen by
// the next. Nil entries are skipped.
func CallObservers(obs ...CallObserver) CallObserver {
	var live []CallObserver
	for _, o := range obs {
		if o != nil {
			live = append(live, o)
		}
	}
	switch len(live) {
	case 0:
		return noCalls{}
	case 1:
		return live[0]
	}
	return callObservers(live)
}

type callObservers []CallObserver

func (m callObservers) CallStarted(ctx context.Context, tool string) (context.Context, CallDone) {
	dones := make([]CallDone, len(m))
	for i, o := range m {
		ctx, dones[i] = o.CallStarted(ctx, tool)
	}
	return ctx, func(src Source, res *mcp.CallToolResult) {
		// Inner first, as spans nest.
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](src, res)
		}
	}
}

// noCalls watches nothing, at the cost of an interface call: the router
// always has an observer, so its call path has no branch for none.
type noCalls struct{}

func (noCalls) CallStarted(ctx context.Context, _ string) (context.Context, CallDone) {
	return ctx, callDoneNothing
}

func callDoneNothing(Source, *mcp.CallToolResult) {}

type noServers struct{}

func (noServers) ServerStatus(string, string, upstream.Status, upstream.Status) {}

type callHeaderKey struct{}

// CallHeader is the header of the HTTP request that carried the call
// running in ctx, where the operator surface knows it, else nil. A 2025
// session's calls run in the context of the request that opened the
// session, so what belongs to the request carrying each call (the trace
// it continues) is read from its header instead.
func CallHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(callHeaderKey{}).(http.Header)
	return h
}

// withCallHeader keeps the carrying request's header where CallHeader
// finds it.
func withCallHeader(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header == nil {
		return ctx
	}
	return context.WithValue(ctx, callHeaderKey{}, extra.Header)
}
