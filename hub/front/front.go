// Package front is the hub's HTTP/1.1 front door: it serves an
// http.Server's handler, answering the requests that make up nearly all of
// the hub's traffic — keep-alive HTTP/1.1 requests with no body or its
// length stated, an MCP client's POSTs, GETs and DELETEs — on connections
// it reads and writes itself, and handing every other connection, whole
// and unread, to the http.Server.
//
// Why not net/http for all of it: for every request it serves, net/http
// starts a goroutine that reads the connection while the handler runs (to
// notice a client hanging up), and stops it again with a read deadline
// once the answer is written. Measured on the hub at one session, that
// goroutine and the wakeups it causes are a third of the CPU of a call.
// Here a request's connection is watched only once the request has run
// for watchAfter: a call that answers sooner — almost all of them — costs
// no goroutine and no wakeup beyond its own.
//
// The request is parsed by net/http's own parser (http.ReadRequest), from
// the bytes of its head. Anything this package does not answer the way
// net/http would — HEAD or CONNECT, another protocol version, a chunked
// body, Expect, Upgrade, Connection: close, a head past one buffer, a head
// the parser or net/http's checks refuse — goes to the http.Server with
// what was read of it replayed, so net/http answers it, errors included.
package front

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves srv's handler on a listener. Its zero value is not usable;
// see New.
type Server struct {
	srv *http.Server
	ln  net.Listener
	// handed is the listener srv serves: the connections handed over.
	handed *handoff

	mu    sync.Mutex
	conns map[*conn]struct{}
	// down: shutting down. Set under mu (so begin and stop agree on
	// which connections are busy), read without it by every answer.
	down atomic.Bool
	// answered and handedOver count requests answered here and
	// connections handed to net/http.
	answered, handedOver atomic.Uint64
	// onWatch and onWatchRead, when set (by tests only), run as a
	// request's watch begins and as its read returns: the moments a
	// client's hang-up or its next request can be timed against.
	onWatch     func()
	onWatchRead func(n int)
	// active counts the connections in the middle of a request.
	active sync.WaitGroup
}

// New serves srv's handler, and its limits (ReadHeaderTimeout,
// ReadTimeout, IdleTimeout), on ln once Serve is called. srv must not be
// started; Shutdown and Close stop both.
func New(srv *http.Server, ln net.Listener) *Server {
	return &Server{srv: srv, ln: ln, handed: newHandoff(ln.Addr()), conns: map[*conn]struct{}{}}
}

// Serve accepts connections until the listener fails or the server is shut
// down (then http.ErrServerClosed).
func (s *Server) Serve() error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.handed) }()
	err := s.accept()
	s.handed.Close()
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && serr != nil && err == nil {
		err = serr
	}
	return err
}

func (s *Server) accept() error {
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.down.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// As net/http: out of file descriptors, say; wait, and
				// take the next one.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		cn := newConn(s, c)
		s.mu.Lock()
		if s.down.Load() {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[cn] = struct{}{}
		s.mu.Unlock()
		go cn.serve()
	}
}

// begin marks cn as in the middle of a request; false: the server is
// shutting down and cn is to close.
func (s *Server) begin(cn *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down.Load() {
		return false
	}
	cn.busy = true
	s.active.Add(1)
	return true
}

// end marks cn as between requests; false: the server is shutting down
// and cn is to close.
func (s *Server) end(cn *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cn.busy = false
	s.active.Done()
	return !s.down.Load()
}

// forget drops cn, which has closed or been handed over.
func (s *Server) forget(cn *conn) {
	s.mu.Lock()
	delete(s.conns, cn)
	s.mu.Unlock()
}

// stop stops accepting and closes the connections waiting for a request;
// with all, also those in the middle of one, whose requests' contexts end.
func (s *Server) stop(all bool) {
	s.mu.Lock()
	s.down.Store(true)
	var closing []*conn
	for cn := range s.conns {
		if all || !cn.busy {
			closing = append(closing, cn)
		}
	}
	s.mu.Unlock()
	s.ln.Close()
	for _, cn := range closing {
		cn.c.Close()
		if all {
			cn.hangUp()
		}
	}
}

// Shutdown stops accepting, closes idle connections, and waits (until ctx
// ends) for the requests being answered, here and on srv.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop(false)
	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	err := s.srv.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// Close closes the listener and every connection at once. As with
// http.Server's Close, handlers still running are not waited for; their
// requests' contexts end.
func (s *Server) Close() error {
	s.stop(true)
	return s.srv.Close()
}

// handoff is the listener the http.Server serves: it accepts the
// connections the front hands it.
type handoff struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// give hands c over; false: the http.Server is no longer accepting, and c
// was not taken.
func (h *handoff) give(c net.Conn) bool {
	select {
	case h.conns <- c:
		return true
	case <-h.done:
		return false
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }
