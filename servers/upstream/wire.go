package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The adapter beneath the SDK's connections: what a call's link needs that
// the SDK's public API does not give it. Each piece stands where the SDK
// has no hook, and does no more than the SDK would have done itself:
//   - sessionRT puts on a call's own streamable HTTP connection the
//     session it belongs to (its id and revision), which the SDK lets only
//     the connection that opened a session carry; keeps the connection
//     from taking the session for its own (its Close would end it); gives
//     a tools/call its parameter headers (x-mcp-header), which the SDK
//     computes only inside ClientSession.CallTool; bounds a JSON answer as
//     the SDK bounds one event; and notes the status it was answered with.
//   - eventGuard reads a call's event stream for the SDK's client an event
//     at a time. The SDK takes one message it cannot read (JSON nested past
//     its bound, an event past its bound on one event) for a broken
//     connection, and drops with it the messages it had read before and
//     not yet handed over: the log lines and progress the server sent ahead
//     of its answer. The guard hands the SDK, in that message's place, the
//     call's answer saying so, so the call reads everything before it in
//     order, and then its refusal (issue 25 defect 5).
//   - stdioGuard (stdio_guard.go) keeps from the SDK's stdio reader a line
//     answering a call that the SDK would take for a broken connection
//     (JSON nested past its bound, a message past its bound on one line),
//     and hands it to that call as the server's unreadable answer (issue 25
//     defect 5), so the session lives on.
//   - drainFor (drain.go) keeps a call's POST alive past the call until the
//     SDK has read its answered stream to the end, so the connection
//     carries the next call instead of being closed under the read.

// maxMessage bounds one message of a server: the SDK's own bound on an
// event of a stream and on a stdio line, which a JSON body is held to too.
// A longer answer is refused, never gathered without end (issue 25 defect
// 8).
const maxMessage = mcp.DefaultMaxEventSize

var tooLarge = fmt.Sprintf("a message larger than the %d MiB the hub takes", maxMessage>>20)

// errTooLarge is a JSON body past maxMessage.
var errTooLarge = errors.New("message too large")

type wireKey struct{}

// wire is what one call's connection is told of its session and its
// call, and what the adapter saw of the server's answers on it.
type wire struct {
	session, version string
	id               []byte // the call's JSON-RPC id, as JSON

	mu         sync.Mutex
	status     int    // of the last answer
	tooBig     bool   // a JSON answer past maxMessage
	unreadable string // why the call's answer could not be read, if it could not

	// The call's POST, and a stream resumed after it, live on the call's
	// context until its answer arrives, then until the SDK has read the
	// rest of the stream (see drainFor).
	release  context.CancelFunc
	stop     func() bool // stops the call's context from ending the POST
	open     int         // answer bodies the SDK has not closed
	answered bool
	bound    *time.Timer
}

// wireWrite is a write on a call's connection: the call's own request
// carries its parameter headers.
type wireWrite struct {
	*wire
	params http.Header
}

func (w *wire) seen() (status int, tooBig bool, unreadable string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status, w.tooBig, w.unreadable
}

func (w *wire) refuse(why string) {
	w.mu.Lock()
	if w.unreadable == "" {
		w.unreadable = why
	}
	w.mu.Unlock()
}

// sessionRT is the HTTP client beneath a call's own connection. A request
// whose context carries no wireWrite (none does) passes unchanged.
type sessionRT struct {
	headers map[string]string // the server's configured headers
	base    http.RoundTripper
}

func (s sessionRT) RoundTrip(r *http.Request) (*http.Response, error) {
	ww, _ := r.Context().Value(wireKey{}).(*wireWrite)
	if ww == nil && len(s.headers) == 0 {
		return s.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	h := r.Header
	if ww != nil {
		if ww.session != "" {
			h["Mcp-Session-Id"] = []string{ww.session}
		}
		// The session's revision, over whatever the SDK's client set: a
		// connection that opened no session takes its revision from the
		// context, and a call's context may be a request the hub serves
		// with the SDK, of its own client's revision. A session revision
		// has no standard headers, which that revision would have added.
		h["Mcp-Protocol-Version"] = []string{ww.version}
		if ww.version < modernVersion {
			delete(h, "Mcp-Method")
			delete(h, "Mcp-Name")
		}
		if r.Method == http.MethodPost {
			for k, v := range ww.params {
				h[k] = v
			}
		}
	}
	setHeaders(h, s.headers)
	resp, err := s.base.RoundTrip(r)
	if err != nil || ww == nil {
		return resp, err
	}
	resp.Header.Del("Mcp-Session-Id")
	ww.mu.Lock()
	ww.status = resp.StatusCode
	ww.mu.Unlock()
	switch ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		b := &boundedBody{ReadCloser: resp.Body, w: ww.wire, left: maxMessage}
		if resp.ContentLength > maxMessage {
			b.left = -1
		}
		resp.Body = b
	case "text/event-stream":
		src := eventReaders.Get().(*bufio.Reader)
		src.Reset(resp.Body)
		resp.Body = &eventGuard{ReadCloser: resp.Body, src: src, w: ww.wire}
	default:
		return resp, nil
	}
	if ww.release != nil {
		ww.bodyOpened()
	}
	return resp, nil
}

// boundedBody is a JSON answer read no further than maxMessage, whose
// nesting is counted as it passes, so a refusal can say what the SDK could
// not read.
type boundedBody struct {
	io.ReadCloser
	w      *wire
	left   int64
	deep   depthScan
	closed bool
}

func (b *boundedBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.closed && b.w.release != nil {
		b.w.bodyClosed()
	}
	b.closed = true
	return err
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		b.w.mu.Lock()
		b.w.tooBig = true
		b.w.mu.Unlock()
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return b.Read(nil)
	}
	b.deep.feed(p[:n])
	if err == io.EOF && b.deep.deepest > rawjson.MaxDepth {
		b.w.refuse(nestedWhy(b.deep.deepest))
	}
	return n, err
}

// eventGuard is a call's event stream as the SDK's client reads it: each
// event whole, as the server wrote it, but for one the SDK could not read,
// which is replaced by the call's answer saying so (a notification the
// SDK could not read is dropped, its event id kept).
type eventGuard struct {
	io.ReadCloser
	src  *bufio.Reader
	w    *wire
	out  []byte // what the SDK has yet to read
	ev   []byte // the event being gathered
	skip bool   // the rest of an event past maxMessage is being passed over
}

// eventReaders are the buffers event streams are read through, reused
// (every call over HTTP may have one): each holds no more than a line of
// the stream, which the guard copies out.
var eventReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

func (g *eventGuard) Close() error {
	if g.src == nil {
		return g.ReadCloser.Close()
	}
	g.src.Reset(nil)
	eventReaders.Put(g.src)
	g.src = nil
	err := g.ReadCloser.Close()
	if g.w.release != nil {
		g.w.bodyClosed()
	}
	return err
}

func (g *eventGuard) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if g.src == nil {
			return 0, io.ErrClosedPipe
		}
		line, err := g.src.ReadSlice('\n')
		if !g.skip {
			g.ev = append(g.ev, line...)
		}
		if len(g.ev) > maxMessage {
			g.ev, g.skip = g.replace(g.ev, tooLarge, true), true
			g.w.mu.Lock()
			g.w.tooBig = true
			g.w.mu.Unlock()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil && len(bytes.TrimRight(line, "\r\n")) > 0 {
			continue
		}
		// An event's end (or the stream's, which ends its last event):
		// hand it on.
		ev := g.ev
		if !g.skip && (err == nil || err == io.EOF) {
			ev = g.check(ev)
		}
		// The event's buffer is gathered into again once the SDK has
		// read all of it (out empty).
		g.out, g.ev, g.skip = ev, g.ev[:0], false
		if err != nil {
			if len(g.out) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// check passes an event on, or its replacement where the SDK could not
// read its message.
func (g *eventGuard) check(ev []byte) []byte {
	var deep depthScan
	for rest := ev; len(rest) > 0; {
		line, tail, _ := bytes.Cut(rest, []byte{'\n'})
		rest = tail
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			deep.feed(v)
		}
	}
	if deep.deepest <= rawjson.MaxDepth {
		return ev
	}
	return g.replace(ev, nestedWhy(deep.deepest), false)
}

// replace writes an event's fields but its data, and, for data that is
// not a notification or a request of the server's, the call's answer that
// its server answered with something the SDK could not read. An event cut
// short at the bound is taken for the answer unread, as its message
// cannot be read whole.
func (g *eventGuard) replace(ev []byte, why string, cut bool) []byte {
	var out, data []byte
	for rest := ev; len(rest) > 0; {
		line, tail, _ := bytes.Cut(rest, []byte{'\n'})
		rest = tail
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if !cut {
				data = append(data, v...)
			}
			continue
		}
		if len(bytes.TrimRight(line, "\r")) > 0 && bytes.IndexByte(line, ':') > 0 {
			out = append(append(out, line...), '\n')
		}
	}
	var m struct {
		Method json.RawMessage `json:"method"`
	}
	if !cut && json.Unmarshal(data, &m) == nil && m.Method != nil {
		return append(out, '\n')
	}
	g.w.refuse(why)
	out = append(out, `data: {"jsonrpc":"2.0","id":`...)
	out = append(out, g.w.id...)
	out = append(out, `,"error":{"code":-32700,"message":"unreadable"}}`...)
	return append(out, "\n\n"...)
}

// paramBinding is an argument a tool's input schema puts in a header
// (x-mcp-header, SEP-2243): its path in the arguments and the header.
type paramBinding struct {
	path   []string
	header string
}

type schemaProperty struct {
	Header     json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// paramBindings reads a tool's parameter headers from its input schema;
// nil for a tool that has none, as most do.
func paramBindings(schema any) []paramBinding {
	b, err := json.Marshal(schema)
	if err != nil || !bytes.Contains(b, []byte(`"x-mcp-header"`)) {
		return nil
	}
	var s schemaProperty
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out []paramBinding
	var walk func(props map[string]schemaProperty, prefix []string)
	walk = func(props map[string]schemaProperty, prefix []string) {
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			var header string
			if json.Unmarshal(p.Header, &header) == nil && header != "" {
				out = append(out, paramBinding{path: path, header: header})
			}
			walk(p.Properties, path)
		}
	}
	walk(s.Properties, nil)
	return out
}

// paramHeaders are the headers a 2026-07-28 tools/call of a tool with
// bindings carries: each argument present as a string, boolean or safe
// integer, encoded as SEP-2243 says (Base64 in a =?base64?…?= wrapper
// where the text is not plain printable ASCII).
func paramHeaders(bindings []paramBinding, args json.RawMessage) http.Header {
	if len(bindings) == 0 {
		return nil
	}
	h := http.Header{}
	for _, b := range bindings {
		raw := args
		for _, key := range b.path {
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) != nil {
				raw = nil
				break
			}
			raw = obj[key]
		}
		if v, ok := headerValue(raw); ok {
			h["Mcp-Param-"+b.header] = []string{v}
		}
	}
	return h
}

// headerValue writes one argument as a header value; false for an absent
// or null argument, or one of a type no header carries.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		const safe = 1<<53 - 1
		if x != math.Trunc(x) || x > safe || x < -safe {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	case string:
		s = x
	default:
		return "", false
	}
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	const pre, post = "=?base64?", "?="
	if plain && !(len(s) >= len(pre)+len(post) && s[:len(pre)] == pre && s[len(s)-len(post):] == post) {
		return s, true
	}
	return pre + base64.StdEncoding.EncodeToString([]byte(s)) + post, true
}

// nestedWhy says what is wrong with an answer nested past the SDK's bound.
func nestedWhy(levels int) string {
	return fmt.Sprintf("JSON nested %d levels deep, past the %d the hub reads", levels, rawjson.MaxDepth)
}

// depthScan counts the nesting of arrays and objects in JSON, as the SDK
// counts it, over bytes fed to it in order.
type depthScan struct {
	d, deepest        int
	inString, escaped bool
}

func (s *depthScan) feed(b []byte) {
	for _, c := range b {
		switch {
		case s.inString && s.escaped:
			s.escaped = false
		case s.inString && c == '\\':
			s.escaped = true
		case s.inString && c == '"':
			s.inString = false
		case s.inString:
		case c == '"':
			s.inString = true
		case c == '{' || c == '[':
			s.d++
			s.deepest = max(s.deepest, s.d)
		case c == '}' || c == ']':
			s.d--
		}
	}
}

// depth is the deepest nesting of arrays and objects in JSON.
func depth(msg []byte) int {
	var s depthScan
	s.feed(msg)
	return s.deepest
}

// withWire is ctx for a write on a call's connection.
func withWire(ctx context.Context, ww *wireWrite) context.Context {
	return context.WithValue(ctx, wireKey{}, ww)
}
