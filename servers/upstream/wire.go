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
	"strings"
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
//   - stdioGuard keeps from the SDK's stdio reader a line answering a call
//     that the SDK would take for a broken connection (JSON nested past
//     its bound, a message past its bound on one line), and hands it to
//     that call as the server's unreadable answer (issue 25 defect 5), so
//     the session lives on.

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

// drainBound bounds how long a call's stream, answered, may stay open for
// the SDK to read to its end: a server that keeps it open longer costs its
// connection, not a goroutine and a connection for good.
const drainBound = 5 * time.Second

// drainFor gives the context a call's POST is written with. It ends with
// ctx while the call waits for its answer. Once answered (w.answer), the
// SDK's client still reads the stream to its end, off the caller's way,
// so that its connection can carry the next call; the caller's context
// ends the moment the call returns (the router cancels its per-call
// timeout), and ending the POST with it would cut that read and close the
// connection, so every call would dial the server anew.
//
// The POST ends with life too (the session's supervision, which ends
// when the instance closes), so no read outlives the instance.
func (w *wire) drainFor(ctx, life context.Context) context.Context {
	post, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopCall, stopLife := context.AfterFunc(ctx, cancel), context.AfterFunc(life, cancel)
	w.stop = stopCall
	w.release = func() {
		stopCall()
		stopLife()
		cancel()
	}
	return post
}

// answer lets the POST outlive the call until its stream is read to the
// end, or drainBound. A call that ends without an answer (done false)
// ends its POST at once, as its context would have.
func (w *wire) answer(done bool) {
	if !done || !w.stop() {
		w.release()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answered = true
	if w.open == 0 {
		w.release()
		return
	}
	w.bound = time.AfterFunc(drainBound, w.release)
}

func (w *wire) bodyOpened() {
	w.mu.Lock()
	w.open++
	w.mu.Unlock()
}

// bodyClosed is the SDK done with an answer's body: read to its end, or
// given up on.
func (w *wire) bodyClosed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open--
	if w.answered && w.open == 0 {
		if w.bound != nil {
			w.bound.Stop()
		}
		w.release()
	}
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

// stdioGuard reads a stdio child's output for the SDK's reader, a line at
// a time. A line that answers a call of the hub's (its id says so) with
// JSON nested past the SDK's bound would end the SDK's session as a broken
// connection; it goes to the call, refused as unreadable, instead.
// Everything else reaches the SDK as the server wrote it.
type stdioGuard struct {
	src     *bufio.Reader
	pending []byte // what the SDK has yet to read of the current line
	line    []byte // a line longer than the reader's buffer, gathered
	refuse  func(id string, err error) bool
}

func newStdioGuard(src io.Reader, refuse func(string, error) bool) *stdioGuard {
	return &stdioGuard{src: bufio.NewReaderSize(src, 64<<10), refuse: refuse}
}

func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.next()
		if len(line) > 0 && !g.take(line) {
			g.pending = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// next is the next line, its newline included. A line whose message is
// past maxMessage is read to its end, no more of it kept than the bound,
// and is never handed to the SDK when it answers a call of the hub's: the
// SDK would refuse it as a broken connection and end the session, and the
// child with it, though the child answered and is fine. The line is whole
// and the next one begins after it, so nothing is out of step: the call is
// refused as the server's unreadable answer, past the bound (issue 25
// defect 5), and the session lives on. Any other line past the bound (a
// notification, a request, an answer to the SDK's own request, which waits
// for it) is handed on, cut at the bound, for the SDK to refuse as it
// always has.
func (g *stdioGuard) next() ([]byte, error) {
	chunk, err := g.src.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return chunk, err
	}
	g.line = append(g.line[:0], chunk...)
	// Room for a message of maxMessage bytes and its line's end.
	for errors.Is(err, bufio.ErrBufferFull) && len(g.line) < maxMessage+2 {
		chunk, err = g.src.ReadSlice('\n')
		g.line = append(g.line, chunk...)
	}
	if !errors.Is(err, bufio.ErrBufferFull) && len(bytes.TrimRight(g.line, "\r\n")) <= maxMessage {
		return g.line, err
	}
	var top topMembers
	top.feed(g.line)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = g.src.ReadSlice('\n')
		top.feed(chunk)
	}
	if id, ok := top.callAnswered(); ok {
		// Kept from the SDK even where the call is no longer waiting
		// (it was cancelled): the SDK's session made no such request.
		g.refuse(id, &UnreadableError{Why: tooLarge})
		return nil, err
	}
	return g.line, err
}

// take hands a call's over-deep answer to the call; false for any other
// line.
func (g *stdioGuard) take(line []byte) bool {
	if !bytes.Contains(line, []byte(`"`+callPrefix)) || depth(line) <= rawjson.MaxDepth {
		return false
	}
	var id string
	if json.Unmarshal(lenientID(line), &id) != nil || !strings.HasPrefix(id, callPrefix) {
		return false
	}
	// Kept from the SDK even where the call is no longer waiting (it was
	// cancelled): the SDK's session made no such request.
	g.refuse(id, &UnreadableError{Why: nestedWhy(depth(line))})
	return true
}

// topMembers reads, from a message fed to it in pieces, as much of its
// top level as tells a call's answer: a string id and whether it has a
// method (a request's). It keeps no more of the message than those.
type topMembers struct {
	depth             int
	object            bool // the message is an object
	wantKey           bool // the next string at the top level is a key
	inString, escaped bool
	str               []byte // the top-level string being read, as written
	keep              bool   // str is a key, or the value of id, and is kept
	isKey             bool
	key               string // the last key read
	id                []byte // the string id, as written
	method            bool
}

// A key the scan looks for, or an id the hub wrote, is short: a longer
// string is not one.
const topStringMax = 256

func (t *topMembers) feed(b []byte) {
	for _, c := range b {
		if t.inString {
			switch {
			case t.escaped:
				t.escaped = false
			case c == '\\':
				t.escaped = true
			case c == '"':
				t.inString = false
				t.endString()
				continue
			}
			if t.keep && len(t.str) < topStringMax {
				t.str = append(t.str, c)
			}
			continue
		}
		switch c {
		case '"':
			t.inString = true
			t.isKey = t.depth == 1 && t.object && t.wantKey
			t.keep = t.depth == 1 && t.object && (t.isKey || t.key == "id")
			t.str = append(t.str[:0], '"')
			if t.isKey {
				t.wantKey = false
			}
		case '{', '[':
			if t.depth == 0 && c == '{' {
				t.object, t.wantKey = true, true
			}
			t.depth++
		case '}', ']':
			t.depth--
		case ',':
			if t.depth == 1 && t.object {
				t.wantKey = true
			}
		}
	}
}

func (t *topMembers) endString() {
	if !t.keep || len(t.str) >= topStringMax {
		return
	}
	var s string
	if json.Unmarshal(append(t.str, '"'), &s) != nil {
		return
	}
	switch {
	case t.isKey:
		t.key = s
		t.method = t.method || s == "method"
	case t.key == "id":
		t.id = append(t.id[:0], s...)
	}
}

// callAnswered is the id of the hub's call the message answers; false for
// any other message.
func (t *topMembers) callAnswered() (string, bool) {
	id := string(t.id)
	return id, !t.method && strings.HasPrefix(id, callPrefix)
}

// lenientID reads the top-level id of a response Go's decoder can read
// (the SDK's, with its bound on nesting, could not): enough to tell whose
// answer it was. nil when even that fails, or for a request.
func lenientID(msg []byte) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method != nil {
		return nil
	}
	return m.ID
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
