package serve

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// limitListener serves at most n connections at once; a connection past
// them is answered 503 at once and closed (overflow.go), never left in the
// kernel's queue: a 2025 session's event stream lasts as long as the
// session, so a client queued behind n of them would wait for good.
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
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			l.refuse(c)
		}
	}
}

// limitConn gives its slot back when closed, once however often it is
// closed, and keeps the inner connection's CloseWrite.
type limitConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

// CloseWrite half-closes the inner connection (a *net.TCPConn sends its
// FIN) while it still reads.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
