package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The model gateway is a box's one way out, and only to its run's model:
// the host serves a unix socket in the box's directory (outside the
// workspace), bound into the box read-only at GatewaySocket, and forwards
// each request on it to the provider with the provider's credentials
// added. A box without network reaches nothing else, and the provider's
// key never enters it: what runs inside holds a placeholder. Each call is
// told to the run's Meter (meter.go), so what it spends is the seat's.
const (
	GatewayDir    = "/run/crewlet"
	GatewaySocket = GatewayDir + "/model.sock"
	// GatewayPort is where, inside a box, the model answers on the box's
	// own loopback (the CLI adapter's forwarder listens there).
	GatewayPort = 8181
)

// Provider is the OpenAI-compatible endpoint a coding CLI's model calls go
// to, as the seat's provider is configured on the host.
type Provider struct {
	// BaseURL is the API's base, such as https://api.openai.com/v1.
	BaseURL string
	// Header is added to every forwarded request (Authorization with the
	// provider's key, say), replacing what the box sent under the same
	// names.
	Header http.Header
	// Meter, if set, is asked before each model call is sent on and told
	// what it spent (meter.go).
	Meter Meter
}

// ServeModel opens the box's model gateway to p. It is served until Close;
// a second call is refused, since one run has one model.
func (b *Box) ServeModel(p Provider) error {
	target, err := url.Parse(p.BaseURL)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("the model's base URL %q is not an http(s) URL", p.BaseURL)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed
	}
	if b.gateway != nil {
		return errors.New("the box's model gateway is already open")
	}
	dir := filepath.Join(b.dir, "gateway")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "model.sock"))
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(target.Path, "/")
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The box names paths under the base it was given
			// (http://127.0.0.1:PORT/v1/...): the same tail goes under
			// the provider's base.
			tail := strings.TrimPrefix(r.In.URL.Path, "/v1")
			r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
			r.Out.URL.Path = base + tail
			r.Out.URL.RawPath = ""
			r.Out.Host = target.Host
			// Of the box's headers only what says the body's type and
			// the answer's goes on (a streamed answer is asked for in
			// the body): an organization, project or cookie header of
			// the box's would spend the key on an account it names.
			// The provider's own are then added.
			r.Out.Header = http.Header{}
			for _, k := range forwardedHeaders {
				if v, ok := r.In.Header[k]; ok {
					r.Out.Header[k] = v
				}
			}
			for k, v := range p.Header {
				r.Out.Header[k] = v
			}
		},
		// A streamed answer reaches the CLI as it is written.
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if c, ok := resp.Request.Context().Value(callKey{}).(*meteredCall); ok {
				c.answered(resp)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if c, ok := r.Context().Value(callKey{}).(*meteredCall); ok {
				c.Err = err
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	gw := &gateway{dir: dir}
	gw.idle = sync.NewCond(&gw.mu)
	// Only the model calls a coding CLI makes are reached: any other
	// path or method is answered here, never sent on with the key.
	only := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, ok := modelRoutes[r.URL.Path]
		if !ok || path.Clean(r.URL.Path) != r.URL.Path {
			http.Error(w, "the model gateway sends on only the model's calls ("+routeList()+"); "+r.URL.Path+" is not one of them", http.StatusNotFound)
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			http.Error(w, "the model gateway sends "+r.URL.Path+" on only as "+method+", not "+r.Method, http.StatusMethodNotAllowed)
			return
		}
		switch err := gw.begin(); {
		case errors.Is(err, errGatewayBusy):
			// A client of the API retries a 429 after a while.
			w.Header().Set("Retry-After", "1")
			answerError(w, http.StatusTooManyRequests, "busy", err.Error())
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer gw.end()
		// A listing of the models is no model call: nothing to charge.
		if r.Method == http.MethodGet {
			proxy.ServeHTTP(w, r)
			return
		}
		metered(w, r, proxy, p.Meter)
	})
	srv := &http.Server{Handler: only, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	gw.srv = srv
	b.gateway = gw
	return nil
}

// modelRoutes are the calls the gateway sends on, each with the one method
// it takes: a completion in the chat-completions or the responses API, and
// the model listing. The provider's key can do much more (list, upload and
// delete files, start fine-tuning jobs), all of it the provider account's
// and none of it the run's.
var modelRoutes = map[string]string{
	"/v1/chat/completions": http.MethodPost,
	"/v1/responses":        http.MethodPost,
	"/v1/models":           http.MethodGet,
}

// routeList says modelRoutes in words, for a refused call.
func routeList() string {
	var out []string
	for p, m := range modelRoutes {
		out = append(out, m+" "+p)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// forwardedHeaders are the only headers of the box's a forwarded call
// keeps.
var forwardedHeaders = []string{"Content-Type", "Accept"}

// metered forwards one model call under meter (nil for none): asked
// first, told after. Its request is read whole first, at most
// maxModelRequest of it.
func metered(w http.ResponseWriter, r *http.Request, proxy http.Handler, meter Meter) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxModelRequest+1))
	switch {
	case err != nil:
		http.Error(w, "the model call's request could not be read", http.StatusBadRequest)
		return
	case len(body) > maxModelRequest:
		http.Error(w, fmt.Sprintf("the model call's request is past the %d MiB the gateway sends on", maxModelRequest>>20), http.StatusRequestEntityTooLarge)
		return
	}
	if meter == nil {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		proxy.ServeHTTP(w, r)
		return
	}
	body = askUsage(r.URL.Path, body)
	done, err := meter(len(body))
	if err != nil {
		refuseCall(w, err)
		return
	}
	c := &meteredCall{ModelCall: ModelCall{Start: time.Now(), Sent: int64(len(body))}}
	r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	// Told once the proxy has passed the answer back whole or given up on
	// it, which it does with a panic (http.ErrAbortHandler) when the CLI
	// hung up mid-answer: what was read of an answer the provider gave is
	// spent.
	defer func() { done(c.result()) }()
	proxy.ServeHTTP(w, r)
}

// callKey carries a metered call in its request's context, from the
// gateway's handler to the proxy's hooks.
type callKey struct{}

// gateway is a box's open model gateway.
type gateway struct {
	dir string
	srv *http.Server

	// inflight counts the calls being forwarded, at most
	// maxModelCallsInFlight: each holds its request (up to
	// maxModelRequest) in the hub's memory. A run drains them as it
	// ends, so every call its CLI made is told to its meter before the
	// run's spending is read, and none starts after.
	mu       sync.Mutex
	idle     *sync.Cond
	inflight int
	drained  bool
}

// maxModelCallsInFlight is how many calls one box's gateway forwards at
// once; one more is answered 429 (errGatewayBusy), which an API client
// retries. A coding CLI makes one at a time, or a few beside each other (a
// session's title, a subagent's); a box opening a hundred would otherwise
// hold a hundred requests in the hub's memory.
const maxModelCallsInFlight = 4

var (
	errGatewayBusy  = fmt.Errorf("the model gateway already forwards %d model calls from this box, as many as it forwards at once; this one was not sent: make it again once one has been answered", maxModelCallsInFlight)
	errGatewayEnded = errors.New("the run this model gateway served has ended")
)

// begin counts a call in, or says why it is not sent on.
func (g *gateway) begin() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained {
		return errGatewayEnded
	}
	if g.inflight >= maxModelCallsInFlight {
		return errGatewayBusy
	}
	g.inflight++
	return nil
}

func (g *gateway) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight--; g.inflight == 0 {
		g.idle.Broadcast()
	}
}

// drain refuses every call from now on and waits for those in flight: a
// run's CLI is gone, so each ends as its connection does.
func (g *gateway) drain() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drained = true
	for g.inflight > 0 {
		g.idle.Wait()
	}
}
