package front

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// bufferLimit is how much of an answer is held before its head is sent:
// an answer that ends within it goes with its length, head and body in
// one write; a longer one, or one flushed early, goes chunked.
const bufferLimit = 64 << 10

// errAnswered is a write after the handler returned.
var errAnswered = errors.New("front: the response was already sent")

// response is the http.ResponseWriter of a request the front answers. It
// writes what net/http would for the same calls: the status line, the
// handler's headers with Date, Content-Length or chunked framing, and a
// sniffed Content-Type where the handler set none.
type response struct {
	cn *conn
	// handlerHeader is the handler's to set; header is what is sent, a
	// copy of it taken when the status is fixed.
	handlerHeader http.Header
	header        http.Header

	mu          sync.Mutex
	status      int
	wroteHeader bool  // the status is fixed
	sent        bool  // the head has been written to the connection
	chunked     bool  // the body is being sent in chunks
	declared    int64 // the Content-Length the handler set; -1: none
	written     int64
	buf         []byte
	finished    bool
	hijacked    bool
	closeAfter  bool  // the connection closes after this answer
	err         error // a write to the connection failed
}

var _ http.Flusher = (*response)(nil)

func (w *response) Header() http.Header { return w.handlerHeader }

func (w *response) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *response) writeHeaderLocked(code int) {
	if w.finished || w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An informational answer goes at once; the final one follows.
		w.send(w.appendHead(w.cn.wbuf[:0], w.handlerHeader, code, false, -1))
		return
	}
	// What the handler sets from here on is not sent, as with net/http.
	w.status, w.wroteHeader = code, true
	w.header = w.handlerHeader.Clone()
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *response) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return 0, errAnswered
	}
	if !w.wroteHeader {
		w.writeHeaderLocked(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	// Counted before the check, as net/http counts: an answer written
	// past its stated length closes its connection once it ends.
	w.written += int64(len(p))
	if w.declared >= 0 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) > bufferLimit {
		w.flushLocked(nil)
	}
	return len(p), w.err
}

// Hijack hands the connection to the handler (http.ResponseController
// calls it): a 2025 session's event stream is served off the front this
// way. The connection's deadlines are lifted and its watch ended; what the
// client sent after the request is in the returned reader.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished || w.sent {
		return nil, nil, errHijackLate
	}
	w.finished, w.hijacked = true, true
	cn := w.cn
	cn.unwatch()
	_ = cn.c.SetDeadline(time.Time{})
	return cn.c, bufio.NewReadWriter(cn.br, bufio.NewWriter(cn.c)), nil
}

var errHijackLate = errors.New("front: the answer has begun: the connection can no longer be taken over")

func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends what has been written (http.ResponseController calls
// it).
func (w *response) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return errAnswered
	}
	if !w.wroteHeader {
		w.writeHeaderLocked(http.StatusOK)
	}
	w.flushLocked(nil)
	return w.err
}

// flushLocked sends the head, if not yet sent, the buffered body, and
// then tail, in one write.
func (w *response) flushLocked(tail []byte) {
	b := w.cn.wbuf[:0]
	if !w.sent {
		w.chunked = w.declared < 0 && bodyAllowed(w.status)
		w.sent = true
		b = w.appendHead(b, w.header, w.status, w.chunked, -1)
	}
	if len(w.buf) > 0 {
		b = w.appendFrame(b, w.buf)
		w.buf = w.buf[:0]
	}
	if b = append(b, tail...); len(b) > 0 {
		w.send(b)
	}
}

// appendFrame appends body to dst as it goes on the wire: a chunk, or as
// it is.
func (w *response) appendFrame(dst, body []byte) []byte {
	if !w.chunked {
		return append(dst, body...)
	}
	dst = strconv.AppendInt(dst, int64(len(body)), 16)
	dst = append(dst, '\r', '\n')
	dst = append(dst, body...)
	return append(dst, '\r', '\n')
}

// finish ends the answer once the handler has returned.
func (w *response) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	if !w.wroteHeader {
		w.writeHeaderLocked(http.StatusOK)
	}
	w.finished = true
	switch {
	case !w.sent:
		length := int64(-1)
		if w.declared < 0 && bodyAllowed(w.status) {
			length = int64(len(w.buf))
		}
		w.sent = true
		w.send(append(w.appendHead(w.cn.wbuf[:0], w.header, w.status, false, length), w.buf...))
	case w.chunked:
		w.flushLocked(lastChunk)
	default:
		w.flushLocked(nil)
	}
	if w.declared >= 0 && w.written != w.declared {
		// Not the bytes stated: the client cannot tell where the next
		// answer starts.
		w.closeAfter = true
	}
}

var lastChunk = []byte("0\r\n\r\n")

// appendHead appends to b the status line and headers h of an answer;
// length, unless -1, is the Content-Length to state.
func (w *response) appendHead(b []byte, h http.Header, code int, chunked bool, length int64) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\n"...)
	if code >= 200 {
		if _, ok := h["Date"]; !ok {
			b = append(b, "Date: "...)
			b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
			b = append(b, "\r\n"...)
		}
		if _, ok := h["Content-Type"]; !ok && bodyAllowed(code) && len(w.buf) > 0 {
			h.Set("Content-Type", http.DetectContentType(w.buf))
		}
		switch {
		case chunked:
			h.Del("Content-Length")
			b = append(b, "Transfer-Encoding: chunked\r\n"...)
		case length >= 0:
			b = append(b, "Content-Length: "...)
			b = strconv.AppendInt(b, length, 10)
			b = append(b, "\r\n"...)
		}
		if strings.EqualFold(h.Get("Connection"), "close") || w.cn.s.down.Load() {
			w.closeAfter = true
		}
		if w.closeAfter {
			h.Del("Connection")
			b = append(b, "Connection: close\r\n"...)
		}
	}
	aw := appender{b}
	_ = h.Write(&aw)
	return append(aw.b, "\r\n"...)
}

// appender collects what http.Header.Write writes. It is an
// io.StringWriter so that Header.Write hands it each name and value as is:
// to a plain io.Writer it converts every string to a new []byte first,
// five to ten allocations per answer.
type appender struct{ b []byte }

var _ io.StringWriter = (*appender)(nil)

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func (a *appender) WriteString(s string) (int, error) {
	a.b = append(a.b, s...)
	return len(s), nil
}

// send writes b, an answer's head and body or the next part of its body,
// in one write: one system call per answer. (net.Buffers would not save
// the copy: behind the server's connection limit the connection is not
// one it can write with one call.) b's memory is kept for the next.
func (w *response) send(b []byte) {
	if cap(b) <= maxKeptBuffer {
		w.cn.wbuf = b[:0]
	}
	if w.err != nil {
		return
	}
	if _, err := w.cn.c.Write(b); err != nil {
		w.err = err
		w.closeAfter = true
	}
}

// maxKeptBuffer bounds the write buffer a connection keeps between
// answers.
const maxKeptBuffer = 2 * bufferLimit

// bodyAllowed reports whether an answer with status code carries a body.
func bodyAllowed(code int) bool {
	return !(code >= 100 && code <= 199) && code != http.StatusNoContent && code != http.StatusNotModified
}
