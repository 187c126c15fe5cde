package upstream

import "context"

// HopObserver is told of every call an instance sends to its server: the
// hop from the hub to a third-party server, which a tracer records as a
// child of the tool call it serves. It is the one seam the call path has
// for that, so Call carries no tracing code of its own.
type HopObserver interface {
	// HopStarted is told before the call is sent; the context it returns
	// is the one the call is sent under, and done is called once with the
	// call's error (nil when the server answered).
	HopStarted(ctx context.Context, server, tool string) (context.Context, func(error))
}

// noHops tells nobody, at the cost of an interface call.
type noHops struct{}

func (noHops) HopStarted(ctx context.Context, _, _ string) (context.Context, func(error)) {
	return ctx, hopDone
}

func hopDone(error) {}
