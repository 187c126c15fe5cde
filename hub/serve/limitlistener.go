package serve

import (
	"errors"
	"net"
	"sync"
)

// limitListener accepts at most n connections at once; the next Accept
// waits until one of them is closed. It does what
// golang.org/x/net/netutil.LimitListener does, and exists because that
// one's connections hide the TCP connection's CloseWrite (golang/go#64830
// asks to export its type; as of x/net v0.63.0 it is still hidden):
// net/http ends a connection it will not read further — a head past
// MaxHeaderBytes answered 431, a body it gave up on — with CloseWrite and
// a linger, so the client reads the answer and a FIN. Without CloseWrite
// it closes outright with the client's bytes unread, the kernel answers
// with a reset, and the client may lose the answer
// (TestHTTPServerAnswersAnOversizedHead431).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

func newLimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		// Closed while waiting for a slot: the inner Accept fails now.
		// Should it hand back a connection all the same, none is served,
		// so close it rather than leave its client hanging.
		for {
			c, err := l.Listener.Accept()
			if err != nil {
				return nil, err
			}
			c.Close()
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
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
