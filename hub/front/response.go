package front

import (
	"bufio"
	"errors"
	"fmt"
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
	cn  *conn
	req *http.Request
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
		w.write(w.head(w.handlerHeader, code, false, -1))
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
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(len(p))
	w.buf = append(w.buf, p...)
	if len(w.buf) > bufferLimit {
		w.flushLocked()
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
	w.flushLocked()
	return w.err
}

// flushLocked sends the head, if not yet sent, and the buffered body.
func (w *response) flushLocked() {
	if !w.sent {
		w.chunked = w.declared < 0 && bodyAllowed(w.status)
		w.sent = true
		h := w.head(w.header, w.status, w.chunked, -1)
		if len(w.buf) == 0 {
			w.write(h)
			return
		}
		w.write(h, w.frame(w.buf)...)
		w.buf = w.buf[:0]
		return
	}
	if len(w.buf) > 0 {
		w.write(nil, w.frame(w.buf)...)
		w.buf = w.buf[:0]
	}
}

// frame is b as it goes on the wire: a chunk, or as it is.
func (w *response) frame(b []byte) [][]byte {
	if !w.chunked {
		return [][]byte{b}
	}
	size := strconv.AppendInt(make([]byte, 0, 18), int64(len(b)), 16)
	return [][]byte{append(size, '\r', '\n'), b, crlf}
}

var crlf = []byte("\r\n")

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
		w.write(w.head(w.header, w.status, false, length), w.buf)
	case w.chunked:
		w.flushLocked()
		w.write(lastChunk)
	default:
		w.flushLocked()
	}
	if w.declared >= 0 && w.written != w.declared {
		// Fewer bytes than stated: the client cannot tell where the next
		// answer starts.
		w.closeAfter = true
	}
}

var lastChunk = []byte("0\r\n\r\n")

// head is the status line and headers h of an answer; length, unless -1,
// is the Content-Length to state.
func (w *response) head(h http.Header, code int, chunked bool, length int64) []byte {
	b := w.cn.out[:0]
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
	b = append(aw.b, "\r\n"...)
	w.cn.out = b
	return b
}

// appender collects what http.Header.Write writes.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// write sends head and then parts in one write to the connection: copied
// together first, since the connection (behind the server's connection
// limit) is not one net.Buffers can write with one call, and a second
// write is a second system call per answer.
func (w *response) write(head []byte, parts ...[]byte) {
	if w.err != nil {
		return
	}
	b := head
	if len(parts) > 0 {
		b = append(w.cn.wbuf[:0], head...)
		for _, p := range parts {
			b = append(b, p...)
		}
		if cap(b) <= maxKeptBuffer {
			w.cn.wbuf = b
		}
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
