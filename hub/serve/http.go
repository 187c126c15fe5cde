package serve

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/crewlet/hub/hub"
)

// The HTTP server's bounds. Anyone who can reach the port can open a
// connection, so none may be held for free: a connection that sends no
// request header in time, a body that never finishes, and a keep-alive
// connection left idle are all closed, and no more than a bounded number
// are open at once (further ones are answered 503 at once: overflow.go).
const (
	defaultReadHeaderTimeout = 10 * time.Second
	// defaultReadTimeout bounds reading a whole request, body included.
	// It does not bound the answer: net/http lifts the read deadline once
	// a request's body has been read (to watch for the client hanging up),
	// so a long call's answer or a 2025 session's event stream outlives
	// it (TestReadTimeoutBoundsTheRequestNotTheAnswer).
	defaultReadTimeout = 60 * time.Second
	defaultIdleTimeout = 30 * time.Second
	// fallbackMaxConns caps connections when the open-file limit cannot
	// be read; otherwise the cap is a share of it (connCapFor).
	fallbackMaxConns = 512
	// maxHeaderBytes: a bearer token and the MCP headers fit many times
	// over; a megabyte of Host (the standard library's default) does not
	// need to be read to be refused.
	maxHeaderBytes = 64 << 10
)

// HTTPLimits bound the hub's HTTP server; a zero field takes its default.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxConns is how many connections are served at once; by default
	// three quarters of the open-file limit (connCapFor).
	MaxConns int
}

func (l *HTTPLimits) ensureDefaults() {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = defaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = defaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = defaultIdleTimeout
	}
	if l.MaxConns <= 0 {
		l.MaxConns = connCapFor(openFileLimit())
	}
}

// newHTTPServer serves h within the limits, and wraps ln so no more than
// MaxConns connections are open at once. It is the one HTTP server of a
// node: plain or, given a TLS configuration, HTTPS with HTTP/2. What the
// server itself has to say (a failed TLS handshake) goes to log as the
// hub's JSON lines (hub.ServerErrorLog).
func newHTTPServer(h http.Handler, ln net.Listener, l HTTPLimits, log *slog.Logger) (*http.Server, net.Listener) {
	l.ensureDefaults()
	srv := &http.Server{
		// A connection serving a request keeps its slot; one serving
		// none gives it to a newcomer past the cap (limitListener).
		Handler:           serving(h),
		ConnContext:       connContext,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          hub.ServerErrorLog(log),
	}
	// The TLS configuration is read when a connection past the cap is to
	// be answered (in Accept, on the serving goroutine): the caller sets it
	// after this returns, before serving. Serve over plain HTTP fills in a
	// configuration of its own for HTTP/2, with no certificate: only one
	// that has a certificate is HTTPS.
	return srv, newLimitListener(ln, l.MaxConns, func() *tls.Config {
		if c := srv.TLSConfig; c != nil && (c.GetCertificate != nil || len(c.Certificates) > 0 || c.GetConfigForClient != nil) {
			return c
		}
		return nil
	})
}
