package front

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

const (
	// bufSize is a connection's read buffer. A request head that does not
	// fit in it goes to net/http, which reads heads up to the server's
	// MaxHeaderBytes; an MCP POST's head is a few hundred bytes.
	bufSize = 4 << 10
	// watchAfter is how long a request runs before its connection is read
	// for a client hanging up (which ends the request's context).
	watchAfter = 50 * time.Millisecond
	// maxDrain is how much of a body its handler left unread is read and
	// dropped to keep the connection; past it the connection closes (as
	// net/http does).
	maxDrain = 256 << 10
)

// aLongTimeAgo is a read deadline that has passed: it stops a read in
// progress.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection the front serves.
type conn struct {
	s      *Server
	c      net.Conn
	cr     *prefixed
	br     *bufio.Reader
	remote string
	ctx    context.Context // the requests' base: the server and local address, as net/http sets them
	busy   bool            // in the middle of a request; guarded by s.mu
	// hijacked: a handler took the connection over; the front leaves it.
	hijacked bool
	lastPost bool // the request answered last was a POST
	// head is what was read of the request being read, kept so the
	// connection can be handed over after its head was parsed; nil when
	// that cannot be known.
	head []byte
	wbuf []byte // an answer's head and body (or part), written at once
	rbuf []byte // an answer's body as the handler writes it

	// The watch of the request being answered (see watchAfter).
	timer    *time.Timer
	mu       sync.Mutex
	cancel   context.CancelFunc // the request's; nil between requests
	body     *body
	watching bool
	watched  chan struct{} // closed when the watch's read has returned
	gone     bool          // the watch's read failed: the client hung up
}

func newConn(s *Server, c net.Conn) *conn {
	cr := &prefixed{r: c}
	cn := &conn{s: s, c: c, cr: cr, br: bufio.NewReaderSize(cr, bufSize), remote: c.RemoteAddr().String()}
	ctx := context.WithValue(context.Background(), http.ServerContextKey, s.srv)
	cn.ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.LocalAddr())
	cn.timer = time.AfterFunc(time.Hour, cn.watch)
	cn.timer.Stop()
	return cn
}

// prefixed reads pending first, then r: a connection with what was read
// of it ahead of its rest (by a watch, while a request was answered; by
// the front, before it handed the connection over).
type prefixed struct {
	pending []byte
	r       io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	return p.r.Read(b)
}

func (cn *conn) serve() {
	defer cn.s.forget(cn)
	defer cn.timer.Stop()
	for first := true; ; first = false {
		// As net/http: the first request's head is due within the header
		// timeout; a later one may come as late as the idle timeout, is
		// waited for until 4 bytes of it are here (a connection that
		// ends before is closed without an answer), and its head is then
		// due within the header timeout.
		wait := 1
		if first {
			cn.setReadDeadline(cn.s.headerTimeout())
		} else {
			cn.setReadDeadline(cn.s.idleTimeout())
			wait = 4
		}
		if _, err := cn.br.Peek(wait); err != nil {
			cn.c.Close()
			return
		}
		if !cn.s.begin(cn) {
			cn.c.Close()
			return
		}
		if !first {
			cn.setReadDeadline(cn.s.headerTimeout())
		}
		if cn.lastPost {
			// As net/http, for clients that end a POST's body with a
			// stray line break.
			b, _ := cn.br.Peek(4)
			_, _ = cn.br.Discard(leadingLineBreaks(b))
		}
		req, ok := cn.readRequest()
		if !ok {
			cn.s.end(cn)
			cn.handOver()
			return
		}
		cn.lastPost = req.Method == http.MethodPost
		keep := cn.serveRequest(req)
		more := cn.s.end(cn)
		if cn.hijacked {
			return
		}
		if !more || !keep {
			cn.closeAfterAnswer()
			return
		}
	}
}

func (cn *conn) setReadDeadline(d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	_ = cn.c.SetReadDeadline(t)
}

func leadingLineBreaks(b []byte) int {
	n := 0
	for n < len(b) && (b[n] == '\r' || b[n] == '\n') {
		n++
	}
	return n
}

// closeAfterAnswer closes the connection once an answer is sent. What the
// client is still sending is read and dropped for a moment first, as
// net/http does: closed with unread input, the connection would be reset,
// and the client could lose the answer it has not read yet.
func (cn *conn) closeAfterAnswer() {
	if cw, ok := cn.c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = cn.c.SetReadDeadline(time.Now().Add(lingerAfterClose))
	_, _ = io.Copy(io.Discard, cn.c)
	cn.c.Close()
}

// lingerAfterClose bounds closeAfterAnswer's reading (net/http's is the
// same).
const lingerAfterClose = 500 * time.Millisecond

// readRequest reads the next request if the front answers it; false: the
// connection goes to net/http, with cn.head (what was consumed of it) and
// the rest unread.
func (cn *conn) readRequest() (*http.Request, bool) {
	if cn.head == nil {
		cn.head = make([]byte, 0, 512)
	}
	cn.head = cn.head[:0]
	var n int
	for {
		b, _ := cn.br.Peek(cn.br.Buffered())
		if n = headEnd(b); n > 0 {
			break
		}
		if len(b) == bufSize {
			return nil, false
		}
		// Not all of the head has come: wait for more of it (within the
		// header timeout). A failed read leaves it to net/http to answer.
		if _, err := cn.br.Peek(len(b) + 1); err != nil {
			return nil, false
		}
	}
	// The whole head is buffered, so the parser reads no more than it
	// (all of it, unless it fails part way). What it read is kept, to be
	// read again by net/http if the front does not answer.
	b, _ := cn.br.Peek(n)
	before := cn.br.Buffered()
	req, err := http.ReadRequest(cn.br)
	if read := before - cn.br.Buffered(); read >= 0 && read <= n {
		cn.head = append(cn.head, b[:read]...)
	} else {
		cn.head = nil // the parser read past the head: nothing to replay
	}
	if err != nil || !answers(req) {
		return nil, false
	}
	return req, true
}

// headEnd is the length of the request head at the start of b (through
// the empty line that ends it, CRLF or bare LF as net/http accepts), or 0
// if b does not hold all of it.
func headEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
	}
	return 0
}

// answers reports whether req is one the front answers itself: HTTP/1.1,
// kept alive, with no body or its length stated, and nothing that asks the
// server for more than an answer. Everything else, including everything
// net/http would refuse, is net/http's. (A connection, once handed over,
// stays net/http's: an MCP client's pooled connection may carry a GET or a
// DELETE among its POSTs, so those are answered here too.)
func answers(req *http.Request) bool {
	if req.Method == http.MethodHead || req.Method == http.MethodConnect || req.ProtoMajor != 1 || req.ProtoMinor != 1 ||
		req.Close || len(req.TransferEncoding) > 0 || req.Header["Expect"] != nil || req.Header["Upgrade"] != nil {
		return false
	}
	// The parser takes the Host header out (refusing two); a request with
	// its host in the target instead (absolute form) is net/http's to
	// check for the header.
	if req.URL.Host != "" || req.Host == "" || !httpguts.ValidHostHeader(req.Host) {
		return false
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// handOver gives the connection to net/http, which reads it from the
// start of the request the front did not answer.
func (cn *conn) handOver() {
	if cn.head == nil {
		cn.c.Close()
		return
	}
	replay := append([]byte(nil), cn.head...)
	if k := cn.br.Buffered(); k > 0 {
		b, _ := cn.br.Peek(k)
		replay = append(replay, b...)
	}
	replay = append(replay, cn.cr.pending...)
	_ = cn.c.SetReadDeadline(time.Time{})
	cn.s.handedOver.Add(1)
	if !cn.s.handed.give(&replayConn{Conn: cn.c, in: &prefixed{pending: replay, r: cn.c}}) {
		cn.c.Close()
	}
}

// replayConn is a connection handed over: reads return first what the
// front had read of it.
type replayConn struct {
	net.Conn
	in *prefixed
}

func (c *replayConn) Read(b []byte) (int, error) { return c.in.Read(b) }

// serveRequest answers req; false: the connection is not to be used again
// (closed, or hijacked by the handler).
func (cn *conn) serveRequest(req *http.Request) bool {
	s := cn.s.srv
	if req.ContentLength > int64(cn.br.Buffered()) && s.ReadTimeout > 0 {
		_ = cn.c.SetReadDeadline(time.Now().Add(s.ReadTimeout))
	}
	if s.WriteTimeout > 0 {
		_ = cn.c.SetWriteDeadline(time.Now().Add(s.WriteTimeout))
	}
	ctx, cancel := context.WithCancel(cn.ctx)
	req = req.WithContext(ctx)
	req.RemoteAddr = cn.remote
	b := &body{r: cn.br}
	b.left.Store(req.ContentLength)
	req.Body = b
	w := &response{cn: cn, handlerHeader: http.Header{}, declared: -1, buf: cn.rbuf[:0]}
	cn.s.answered.Add(1)

	cn.mu.Lock()
	cn.cancel, cn.body, cn.gone = cancel, b, false
	cn.mu.Unlock()
	cn.timer.Reset(watchAfter)
	ok := cn.run(w, req)
	here := cn.unwatch()
	if w.hijacked {
		cancel()
		cn.hijacked = true
		return false
	}

	if left := b.left.Load(); left > 0 && ok && here {
		if left > maxDrain {
			w.closeAfter = true
		} else {
			cn.setReadDeadline(s.ReadTimeout)
		}
	}
	if ok && here {
		w.finish()
	}
	if cap(w.buf) <= maxKeptBuffer {
		// Answers on a connection are written one after another: the
		// next one buffers in the same memory.
		cn.rbuf = w.buf[:0]
	}
	cancel()
	if !ok || !here || w.closeAfter || w.err != nil {
		return false
	}
	if left := b.left.Load(); left > 0 {
		if _, err := io.CopyN(io.Discard, b, left); err != nil {
			return false
		}
	}
	return true
}

// run calls the handler; false: it panicked, and the connection closes
// without an answer, as net/http closes it.
func (cn *conn) run(w *response, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			if p == http.ErrAbortHandler {
				return
			}
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			msg := fmt.Sprintf("http: panic serving %v: %v\n%s", cn.remote, p, buf)
			if l := cn.s.srv.ErrorLog; l != nil {
				l.Print(msg)
			} else {
				log.Print(msg)
			}
		}
	}()
	h := cn.s.srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	h.ServeHTTP(w, req)
	return true
}

// watch starts reading the connection of a request that has run for
// watchAfter, once its body has been read: a read that fails means the
// client has hung up, and the request's context ends.
func (cn *conn) watch() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.cancel == nil || cn.watching {
		return
	}
	if cn.body.left.Load() > 0 {
		// The handler is still reading the body; look again later.
		cn.timer.Reset(watchAfter)
		return
	}
	// The read's deadline is lifted here, under the lock, not in the
	// read's goroutine: unwatch stops the read with a deadline of its own,
	// which must come after this one.
	_ = cn.c.SetReadDeadline(time.Time{})
	cn.watching = true
	cn.watched = make(chan struct{})
	if h := cn.s.onWatch; h != nil {
		h()
	}
	go cn.watchRead(cn.cancel, cn.watched)
}

func (cn *conn) watchRead(cancel context.CancelFunc, done chan struct{}) {
	defer close(done)
	var b [1]byte
	n, err := cn.c.Read(b[:])
	cn.mu.Lock()
	if n == 1 {
		// The start of the next request: the loop reads it first.
		cn.cr.pending = append(cn.cr.pending, b[0])
	}
	var ne net.Error
	cn.gone = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	cn.mu.Unlock()
	if h := cn.s.onWatchRead; h != nil {
		h(n)
	}
	if cn.gone {
		cancel()
	}
}

// unwatch ends the request's watch; false: the client has hung up.
func (cn *conn) unwatch() bool {
	cn.timer.Stop()
	cn.mu.Lock()
	cn.cancel = nil
	watching, done := cn.watching, cn.watched
	cn.watching = false
	cn.mu.Unlock()
	if watching {
		_ = cn.c.SetReadDeadline(aLongTimeAgo)
		<-done
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return !cn.gone
}

// hangUp ends the context of the request being answered, if any.
func (cn *conn) hangUp() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.cancel != nil {
		cn.cancel()
	}
}

// body is a request's body: the stated number of bytes from the
// connection.
type body struct {
	r    io.Reader
	left atomic.Int64
}

func (b *body) Read(p []byte) (int, error) {
	left := b.left.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.left.Add(-int64(n))
	if err == io.EOF && int64(n) < left {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && int64(n) == left {
		err = io.EOF
	}
	return n, err
}

// Close leaves what is unread to the connection's loop, which drains it
// or closes the connection.
func (b *body) Close() error { return nil }

func (s *Server) headerTimeout() time.Duration {
	if d := s.srv.ReadHeaderTimeout; d > 0 {
		return d
	}
	return s.srv.ReadTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if d := s.srv.IdleTimeout; d > 0 {
		return d
	}
	return s.srv.ReadTimeout
}
