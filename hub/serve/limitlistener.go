package serve

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// limitListener serves at most n connections at once; a connection past
// them is answered 503 at once and closed (overflow.go), never left in the
// kernel's queue: a 2025 session's event stream lasts as long as the
// session, so a client queued behind n of them would wait for good.
//
// Only connections serving a request count as taken, though. A connection
// past the cap first takes the place of the connection that has waited
// longest without a request in service — one that has sent nothing since
// it connected, one still sending its head (at a byte a second, say), one
// left idle between requests — which is closed. So sockets that send
// nothing cannot keep a working client out, for as long as the header
// timeout or at all: a slot is held past a newcomer only by a request
// being answered, and a request without a verified credential is answered
// at once (401), so what holds the node is verified clients' requests,
// which the caps per credential bound. The 503 is for a node whose every
// slot is serving.
//
// It counts as golang.org/x/net/netutil.LimitListener does, and exists
// because that one's connections hide the TCP connection's CloseWrite
// (golang/go#64830 asks to export its type; as of x/net v0.63.0 it is
// still hidden): net/http ends a connection it will not read further — a
// head past MaxHeaderBytes answered 431, a body it gave up on — with
// CloseWrite and a linger, so the client reads the answer and a FIN.
// Without CloseWrite it closes outright with the client's bytes unread,
// the kernel answers with a reset, and the client may lose the answer
// (TestHTTPServerAnswersAnOversizedHead431).
type limitListener struct {
	net.Listener
	sem chan struct{}
	// overflow counts the 503 answers in flight; past overflowInFlight a
	// connection is closed at once, so a flood cannot pile goroutines.
	overflow chan struct{}
	// tlsConfig, when it returns a configuration, is the HTTPS one: a
	// connection past the cap shakes hands before it reads its 503.
	tlsConfig func() *tls.Config
	// answerWithin bounds one 503 answer whole (overflowDeadline).
	answerWithin time.Duration

	// mu guards waiting and each connection's serving and elem.
	mu sync.Mutex
	// waiting are the open connections serving no request, the one
	// waiting longest first: the first to give its place to a newcomer.
	waiting list.List
}

func newLimitListener(ln net.Listener, n int, tlsConfig func() *tls.Config) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n),
		overflow: make(chan struct{}, overflowInFlight), tlsConfig: tlsConfig, answerWithin: overflowDeadline}
}

// Accept hands back the next connection within the cap, answering those
// past it on the way.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		l.refuse(c)
	}
}

// admit gives c a slot: a free one, or the one of the connection waiting
// longest for a request, closed for it. nil means every slot is serving.
func (l *limitListener) admit(c net.Conn) *limitConn {
	for {
		select {
		case l.sem <- struct{}{}:
			lc := &limitConn{Conn: c, l: l}
			l.mu.Lock()
			lc.elem = l.waiting.PushBack(lc)
			l.mu.Unlock()
			return lc
		default:
		}
		l.mu.Lock()
		e := l.waiting.Front()
		if e == nil {
			l.mu.Unlock()
			return nil
		}
		old := e.Value.(*limitConn)
		l.waiting.Remove(e)
		old.elem = nil
		l.mu.Unlock()
		// Closing gives its slot back at once (Close), for the next
		// turn of the loop; only Accept takes slots, so none is lost to
		// another.
		_ = old.Close()
	}
}

// limitConn gives its slot back when closed, once however often it is
// closed, and keeps the inner connection's CloseWrite.
type limitConn struct {
	net.Conn
	l           *limitListener
	releaseOnce sync.Once
	// serving counts the requests in service on it (several over
	// HTTP/2); elem is its place in l.waiting while it serves none.
	serving int
	elem    *list.Element
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(func() {
		c.l.mu.Lock()
		if c.elem != nil {
			c.l.waiting.Remove(c.elem)
			c.elem = nil
		}
		c.serving = -1 << 30 // closed: never waiting again
		c.l.mu.Unlock()
		<-c.l.sem
	})
	return err
}

// begin and end bracket a request in service on c.
func (c *limitConn) begin() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.serving++
	if c.elem != nil {
		c.l.waiting.Remove(c.elem)
		c.elem = nil
	}
}

func (c *limitConn) end() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.serving--; c.serving == 0 {
		c.elem = c.l.waiting.PushBack(c)
	}
}

// connKey carries a request's *limitConn in its context.
type connKey struct{}

// connContext is the server's ConnContext: it notes the connection a
// request arrives on (under TLS, the one inside it).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// serving marks each request's connection as serving while h answers it,
// so that connection keeps its place.
func serving(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
			lc.begin()
			defer lc.end()
		}
		h.ServeHTTP(w, r)
	})
}

// CloseWrite half-closes the inner connection (a *net.TCPConn sends its
// FIN) while it still reads.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
