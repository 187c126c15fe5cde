package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioLink carries fast calls over a stdio child's pipes, beside the SDK's
// session on the same pipes. Messages on stdio are lines: a fast request is
// written as one line between the SDK's (writes share one lock), and the
// child's answers to fast requests are taken out of its output before the
// SDK reads it (demux), so the SDK never decodes them. Everything else the
// child writes reaches the SDK as it was written.
type stdioLink struct {
	w  *lockedWriter
	dm *demux
}

// A call whose answer is late gets the child pinged, on a doubling
// schedule. A server built with Go 1.26 or later can stop for good with a
// request read and its answer unwritten, its only busy thread parked in a
// blocking read of stdin, until more input arrives: with go-sdk's stdio
// server about once in 6,000 to 500,000 calls made one at a time here,
// never with the same server built with Go 1.25. Any line wakes it; a ping
// is one every MCP server must answer, and its answer is claimed here
// like a fast call's, so the SDK never sees it.
const (
	nudgeFirst = 500 * time.Millisecond
	nudgeMax   = 15 * time.Second
)

func (l *stdioLink) call(ctx context.Context, _ *flight, id, _ string, req []byte) (json.RawMessage, error) {
	ch, err := l.dm.expect(id)
	if err != nil {
		return nil, err
	}
	defer l.dm.forget(id)
	if err := l.w.writeLine(req); err != nil {
		return nil, errLinkBroken
	}
	var pings []string
	defer func() {
		for _, p := range pings {
			l.dm.forget(p)
		}
	}()
	next := nudgeFirst
	wait := time.NewTimer(next)
	defer wait.Stop()
	for {
		select {
		case msg, ok := <-ch:
			if !ok {
				return nil, errLinkBroken
			}
			return answerOf(msg, id)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait.C:
			p := id + "-ping-" + strconv.Itoa(len(pings)+1)
			if _, err := l.dm.expect(p); err == nil {
				pings = append(pings, p)
				_ = l.w.writeLine([]byte(`{"jsonrpc":"2.0","id":"` + p + `","method":"ping"}`))
			}
			next = min(2*next, nudgeMax)
			wait.Reset(next)
		}
	}
}

func (l *stdioLink) cancel(id, reason string) {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `","reason":`)
	r, _ := json.Marshal(reason)
	_ = l.w.writeLine(append(append(b, r...), "}}"...))
}

// lockedWriter is the child's stdin, shared by the SDK's session and the
// fast calls: each writes a whole line under the lock, so no two lines
// interleave. (The SDK writes every message with one Write.)
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeLine writes msg and its newline in one Write; msg may be
// appended to.
func (l *lockedWriter) writeLine(msg []byte) error {
	msg = append(msg, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(msg)
	return err
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// maxLine bounds a line the demux gathers: the SDK's own bound on one
// message. A longer line goes on to the SDK, which refuses it as it always
// has.
const maxLine = mcp.DefaultMaxLineLength

// demux reads the child's output a line at a time for the SDK's reader,
// handing each answer to a fast call to that call instead. The server's log
// lines and progress go to notify as they are read, in the order the
// server wrote them: a fast call's answer skips the SDK's queue, and must
// not overtake what the server said before it.
type demux struct {
	src     *bufio.Reader
	pending []byte // what the SDK has yet to read of the current line
	line    []byte // the line being gathered, reused
	notify  func(method string, params json.RawMessage)

	mu      sync.Mutex
	waiting map[string]chan []byte // by request id
	broken  error
}

func newDemux(src io.Reader, notify func(string, json.RawMessage)) *demux {
	return &demux{src: bufio.NewReaderSize(src, 64<<10), waiting: map[string]chan []byte{}, notify: notify}
}

// expect registers a fast call's id before its request is written.
func (d *demux) expect(id string) (chan []byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken != nil {
		return nil, errLinkBroken
	}
	ch := make(chan []byte, 1)
	d.waiting[id] = ch
	return ch, nil
}

func (d *demux) forget(id string) {
	d.mu.Lock()
	delete(d.waiting, id)
	d.mu.Unlock()
}

// Read is the SDK's reader: the child's output without the answers to fast
// calls. It runs on the SDK's one reading goroutine.
func (d *demux) Read(p []byte) (int, error) {
	for len(d.pending) == 0 {
		line, err := d.next()
		if len(line) > 0 && !d.claim(line) {
			d.pending = line
			break
		}
		if err != nil {
			d.fail(err)
			return 0, err
		}
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

// next gathers the next line, its newline included; a line past maxLine
// is handed on in pieces.
func (d *demux) next() ([]byte, error) {
	d.line = d.line[:0]
	for {
		chunk, err := d.src.ReadSlice('\n')
		d.line = append(d.line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) || len(d.line) >= maxLine {
			return d.line, err
		}
	}
}

// claim takes a line that answers a fast call (handed to it) or carries a
// log line or progress (handed to notify); false for any other, which the
// SDK reads.
func (d *demux) claim(line []byte) bool {
	if d.notify != nil && (bytes.Contains(line, []byte(`"notifications/message"`)) || bytes.Contains(line, []byte(`"notifications/progress"`))) {
		if method, params, ok := notification(bytes.TrimRight(line, "\r\n")); ok &&
			(method == "notifications/message" || method == "notifications/progress") {
			d.notify(method, params)
			return true
		}
	}
	if !bytes.Contains(line, []byte(`"crewlet-fast-`)) {
		return false
	}
	msg := bytes.TrimRight(line, "\r\n")
	id, _, _, ok, err := response(msg)
	if err != nil {
		// An answer the hub cannot read as the SDK would (invalid UTF-8,
		// nesting past its bound) is still the call's, when its id says
		// so: the call is refused as unreadable rather than left waiting
		// on an answer the SDK will not take either (issue 25 defect 5).
		id, ok = lenientID(msg), true
	}
	if !ok || len(id) < 2 || id[0] != '"' {
		return false
	}
	d.mu.Lock()
	ch, found := d.waiting[string(id[1:len(id)-1])]
	if found {
		delete(d.waiting, string(id[1:len(id)-1]))
	}
	d.mu.Unlock()
	if !found {
		return false
	}
	// The call owns its answer; the next line is gathered afresh.
	ch <- msg
	d.line = nil
	return true
}

// fail ends every fast call waiting: the output ended under them.
func (d *demux) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken == nil {
		d.broken = err
	}
	for id, ch := range d.waiting {
		close(ch)
		delete(d.waiting, id)
	}
}

// notification reads a notification's method and params; ok is false for
// any other message.
func notification(msg []byte) (method string, params json.RawMessage, ok bool) {
	hasID := false
	err := rawjson.Members(msg, func(key, _, val []byte) error {
		switch string(key) {
		case "method":
			m, ok := rawjson.StringText(val)
			if !ok {
				return rawjson.ErrSyntax
			}
			method = m
		case "params":
			params = val
		case "id":
			hasID = string(val) != "null"
		}
		return nil
	})
	return method, params, err == nil && method != "" && !hasID
}
