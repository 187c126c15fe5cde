package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// http1Pool carries fast calls to a plain-HTTP server on kept connections,
// each request written and its response read by the calling goroutine.
// net/http's client hands every request to a writer goroutine and every
// response back from a reader goroutine; with one call at a time each
// handoff wakes a thread, which cost the hub about a fifth of its CPU per
// forwarded call at one session. The pool serves only what the client would send as
// written: an http:// URL reached without a proxy, by an instance on its own
// transport. Everything else, and everything the SDK sends, goes through
// the client.
//
// It owns no goroutine. A call's context bounds the exchange through the
// connection's deadline.
type http1Pool struct {
	addr string // host:port

	mu     sync.Mutex
	idle   []*http1Conn
	closed bool
}

// maxIdleHTTP1 is how many kept connections wait for the next call: as many
// as the instance's own transport keeps for the SDK.
const maxIdleHTTP1 = 64

type http1Conn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// newHTTP1Pool answers a pool for rawURL, or nil when the URL is not one it
// serves as the client would: not http://, or sent through a proxy.
func newHTTP1Pool(rawURL string, proxy func(*http.Request) (*url.URL, error)) *http1Pool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return nil
	}
	if proxy != nil {
		if p, err := proxy(&http.Request{URL: u}); err != nil || p != nil {
			return nil
		}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &http1Pool{addr: addr}
}

// errHTTP1Closed is a call after the instance stopped.
var errHTTP1Closed = errors.New("the server's connections are closed")

// do sends req and answers its response. Reading the body to its end and
// closing it gives the connection back. A kept connection the server has
// closed is found before the request is written, and a new one dialled.
func (p *http1Pool) do(req *http.Request) (*http.Response, error) {
	c, err := p.get(req.Context())
	if err != nil {
		return nil, err
	}
	return p.exchange(req.Context(), c, req)
}

func (p *http1Pool) exchange(ctx context.Context, c *http1Conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// An informational answer (103 Early Hints) comes before the
		// response, as the client skips it.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		resp.Body = &http1Body{body: resp.Body, ctx: ctx, pool: p, c: c, stop: stop, keep: !resp.Close}
		return resp, nil
	}
}

// get takes a kept connection the server still holds open, or dials one.
func (p *http1Pool) get(ctx context.Context) (*http1Conn, error) {
	p.mu.Lock()
	for len(p.idle) > 0 && !p.closed {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		if c.open() {
			return c, nil
		}
		_ = c.c.Close()
		p.mu.Lock()
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errHTTP1Closed
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &http1Conn{c: conn, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 16<<10)}, nil
}

// open reports whether a kept connection is still open and quiet.
func (c *http1Conn) open() bool { return c.br.Buffered() == 0 && quiet(c.c) }

// quiet reports whether a kept connection is still open with nothing to
// read, by peeking at its socket without waiting: a server that closed it
// (its idle timeout, a restart) has left an end of stream there, and one
// that wrote unasked has left bytes. A read with a deadline cannot tell:
// one already past fails before it looks.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		// Nothing to read yet is the one answer that says open: a closed
		// connection reads zero bytes, a chatty one some.
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}

// put keeps c for the next call, unless enough wait or the pool closed.
func (p *http1Pool) put(c *http1Conn) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < maxIdleHTTP1 {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		_ = c.c.Close()
	}
}

// close closes the kept connections and refuses new calls; a call under
// way closes its own when its body is closed. Safe twice, and on nil.
func (p *http1Pool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.c.Close()
	}
}

// http1Body is a response's body on a pool's connection: read to its end
// and closed, the connection goes back to the pool; closed before, the
// connection is closed (what is left of the response is not wanted).
type http1Body struct {
	body io.ReadCloser
	ctx  context.Context
	pool *http1Pool
	c    *http1Conn
	stop func() bool
	keep bool // the server did not ask to close the connection
	eof  bool
	done bool
}

func (b *http1Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

func (b *http1Body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop is false when the call's context ended and the connection's
	// deadline was cut: it cannot be kept.
	if b.stop() && b.eof && b.keep {
		b.pool.put(b.c)
		return nil
	}
	return b.c.c.Close()
}
