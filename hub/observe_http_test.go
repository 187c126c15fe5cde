package hub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// observerCtx is an observer that gives the request a context of its own
// (a tracer's span) when own is set, and the request's own otherwise (the
// metrics); it records the route it is told at the end.
type observerCtx struct {
	own   bool
	route *string
}

type observerKey struct{}

func (o observerCtx) RequestStarted(r *http.Request) (context.Context, func(string, int)) {
	ctx := r.Context()
	if o.own {
		ctx = context.WithValue(ctx, observerKey{}, "span")
	}
	return ctx, func(route string, _ int) { *o.route = route }
}

// The request an observed handler is given is the server's own unless an
// observer gave it a context of its own: a copy is held as long as the
// handler runs, which for a 2025 session's event stream is the session's
// life. Either way the observer is told the route the mux chose.
func TestObservedRequestIsCopiedOnlyForAContextOfItsOwn(t *testing.T) {
	var got *http.Request
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x/{id}", func(_ http.ResponseWriter, r *http.Request) { got = r })
	for _, own := range []bool{false, true} {
		var route string
		req := httptest.NewRequest("GET", "/x/7", nil)
		ObserveRequests(mux, observerCtx{own: own, route: &route}).ServeHTTP(httptest.NewRecorder(), req)
		if route != "GET /x/{id}" {
			t.Errorf("own context %v: the observer was told route %q", own, route)
		}
		switch {
		case !own && got != req:
			t.Error("the request was copied for an observer that kept its context")
		case own && (got == req || got.Context().Value(observerKey{}) != "span"):
			t.Errorf("the observer's context did not reach the handler (same request: %v)", got == req)
		}
	}
}
