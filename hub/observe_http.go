package hub

import (
	"context"
	"net/http"
)

// RequestObserver is told of every operator request: before it is served,
// and once when it ends, with the route pattern that served it (empty when
// none matched) and the status it answered. The context it returns is the
// one the request is served in, so a span it opens there is the parent of
// the tool calls the request makes.
type RequestObserver interface {
	RequestStarted(r *http.Request) (context.Context, func(route string, status int))
}

// ObserveRequests serves h, telling each of obs of every request. With no
// observer it is h itself.
func ObserveRequests(h http.Handler, obs ...RequestObserver) http.Handler {
	var live []RequestObserver
	for _, o := range obs {
		if o != nil {
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		return h
	}
	return &observedHandler{h: h, live: live}
}

// observedHandler is ObserveRequests' handler: a type of its own, not a
// HandlerFunc, and its frame kept small, since both stay on the stack of
// a 2025 session's event stream for the session's life (mcpEndpoint).
type observedHandler struct {
	h    http.Handler
	live []RequestObserver
}

func (oh *observedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := startObserved(w, r, oh.live)
	defer o.end()
	oh.h.ServeHTTP(o.w, o.r)
}

// observed is one request as its observers see it.
type observed struct {
	w     *statusWriter
	r     *http.Request
	dones []func(string, int)
}

func startObserved(w http.ResponseWriter, r *http.Request, live []RequestObserver) *observed {
	// A copy of the request only where an observer gave it a context of
	// its own: the one h is given is held for as long as h runs, which
	// for a 2025 session's event stream is the session's life.
	o := &observed{w: &statusWriter{ResponseWriter: w}, r: r, dones: make([]func(string, int), len(live))}
	for i, obs := range live {
		var ctx context.Context
		ctx, o.dones[i] = obs.RequestStarted(o.r)
		if ctx != o.r.Context() {
			o.r = o.r.WithContext(ctx)
		}
	}
	return o
}

// end tells the observers, last first, of the route the mux chose (it
// records it on the request it is given) and the status answered.
func (o *observed) end() {
	status := o.w.status
	if status == 0 {
		status = http.StatusOK
	}
	for i := len(o.dones) - 1; i >= 0; i-- {
		o.dones[i](o.r.Pattern, status)
	}
}

// statusWriter keeps the status a handler answered. It flushes and
// unwraps, so an event stream or an MCP session's stream is served
// through it exactly as without it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
