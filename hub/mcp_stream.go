package hub

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// A 2025 session's event stream (its GET) lasts as long as the session,
// idle most of that time. Served by net/http, each holds the connection's
// read and write buffers (8 KiB), the response's own (2 KiB), and the
// connection's goroutine with the whole handler chain on its stack. The hub
// takes such a stream off the HTTP server instead: it hijacks the
// connection and runs the SDK's handler for the stream in a goroutine of
// its own, writing the response to the connection itself, so the server's
// buffers and goroutine are freed as soon as the stream has begun. The
// SDK still serves the stream, byte for byte as it would; only the HTTP/1.1
// framing around it is the hub's.
//
// A stream ends as it did: when its session closes (the SDK's handler
// returns), or when the client hangs up (a read on the connection fails,
// which cancels the handler's context). The connection is then closed: the
// response says Connection: close, since the connection is not handed back.

// detachStream serves a 2025 GET stream off the HTTP server, reporting
// false (nothing done) where it cannot: not HTTP/1.1, or a writer that
// cannot be hijacked.
func (f *operator) detachStream(w http.ResponseWriter, r *http.Request) bool {
	if f.noFast.Load() || r.ProtoMajor != 1 || r.ProtoMinor < 1 || r.Header.Get("Last-Event-ID") != "" ||
		f.sessions.get(r.Header.Get("Mcp-Session-Id")) == nil {
		return false
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	// What the client sent after its GET (nothing, on a stream) is not
	// read; the buffers go back to the garbage collector with the server's
	// connection.
	_ = brw
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	sw := &streamWriter{conn: conn, header: http.Header{}}
	sr := r.WithContext(ctx)
	f.streams.Add(2)
	f.streamsOpen.Add(1)
	go func() {
		defer f.streams.Done()
		// The client hanging up ends the stream: a read fails.
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	go func() {
		defer f.streams.Done()
		defer f.streamsOpen.Add(-1)
		defer cancel()
		defer conn.Close()
		defer func() {
			// As the HTTP server does for a handler that panics: the
			// connection is dropped, the node keeps running.
			if p := recover(); p != nil {
				f.log.Error("event_stream_panicked", "panic", fmt.Sprint(p))
			}
		}()
		f.stateful.ServeHTTP(sw, sr)
		sw.finish()
	}()
	return true
}

// waitStreams waits, at most bound, for the streams taken off the HTTP
// server to end once their sessions are closed.
func (f *operator) waitStreams(bound time.Duration) {
	done := make(chan struct{})
	go func() {
		f.streams.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(bound):
	}
}

// streamWriter is an HTTP/1.1 response written straight to a hijacked
// connection: chunked (unless the handler set a length), each Write one
// chunk sent at once, so Flush has nothing to do.
type streamWriter struct {
	conn   net.Conn
	header http.Header

	mu      sync.Mutex
	wrote   bool
	chunked bool
	err     error
}

var _ http.Flusher = (*streamWriter)(nil)

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *streamWriter) writeHeaderLocked(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.header
	h.Set("Connection", "close")
	if h.Get("Content-Length") == "" {
		h.Set("Transfer-Encoding", "chunked")
		w.chunked = true
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(code))
	b.WriteString("\r\n")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	w.send(b.Bytes())
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.chunked {
		w.send(p)
	} else {
		b := make([]byte, 0, len(p)+16)
		b = strconv.AppendInt(b, int64(len(p)), 16)
		b = append(b, "\r\n"...)
		b = append(b, p...)
		b = append(b, "\r\n"...)
		w.send(b)
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush sends the header if it was not sent; what was written is sent
// already.
func (w *streamWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush, saying whether the connection failed.
func (w *streamWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
	return w.err
}

// finish ends the response once the handler has returned.
func (w *streamWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(http.StatusOK)
	if w.chunked {
		w.send([]byte("0\r\n\r\n"))
	}
}

func (w *streamWriter) send(b []byte) {
	if w.err != nil {
		return
	}
	_, w.err = w.conn.Write(b)
}
