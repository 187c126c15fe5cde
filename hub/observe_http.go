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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A copy of the request only where an observer gave it a context
		// of its own: the one h is given is held for as long as h runs,
		// which for a 2025 session's event stream is the session's life.
		inner := r
		dones := make([]func(string, int), len(live))
		for i, o := range live {
			var ctx context.Context
			ctx, dones[i] = o.RequestStarted(inner)
			if ctx != inner.Context() {
				inner = inner.WithContext(ctx)
			}
		}
		rw := &statusWriter{ResponseWriter: w}
		// The mux records the pattern it chose on the request it is given.
		defer func() {
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](inner.Pattern, status)
			}
		}()
		h.ServeHTTP(rw, inner)
	})
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
