package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// The model gateway is a box's one way out, and only to its run's model:
// the host serves a unix socket in the box's directory (outside the
// workspace), bound into the box read-only at GatewaySocket, and forwards
// each request on it to the provider with the provider's credentials
// added. A box without network reaches nothing else, and the provider's
// key never enters it: what runs inside holds a placeholder.
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
			for k, v := range p.Header {
				r.Out.Header[k] = v
			}
		},
		// A streamed answer reaches the CLI as it is written.
		FlushInterval: -1,
	}
	// Only the model's API is reached: a path outside /v1/ (or climbing
	// out of it) is answered here, never sent on with the key.
	only := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := path.Clean(r.URL.Path); !strings.HasPrefix(p, "/v1/") || p != r.URL.Path {
			http.Error(w, "the model gateway serves only the model's API, under /v1/", http.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: only, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.gateway = &gateway{dir: dir, srv: srv}
	return nil
}

// gateway is a box's open model gateway.
type gateway struct {
	dir string
	srv *http.Server
}
