//lint:file-ignore SA1019 a hub forwards logging (deprecated in 2026-07-28, SEP-2577) for clients of the session revisions, which still use it.

package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/rawjson"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path of /operator/mcp: the hub answers a tools/call itself, on
// both protocol revisions, reading of the request only what the route and
// the decision need and writing the answer as JSON it assembles, while the
// SDK serves everything else (sessions, initialize, lists, resources,
// prompts, notifications). A request the fast path is not sure it would
// answer exactly as the SDK does (anything unusual in its framing, headers
// or metadata) is left to the SDK, which answers it as it always has.

// fastCall is a tools/call request as the fast path reads it.
type fastCall struct {
	// id is the JSON-RPC id as the SDK writes it back, key as it keys
	// the call (fastID).
	id    []byte
	key   jsonrpc.ID
	name  string
	args  json.RawMessage
	token json.RawMessage // the client's progress token as written; nil: none asked for
	// From a 2026-07-28 request's _meta.
	version  string
	caps     bool // clientCapabilities present, as an object
	logLevel mcp.LoggingLevel
}

// readFastCall reads a single tools/call request. ok is false for anything
// else, and for a request the SDK might read otherwise than as written.
func readFastCall(body []byte) (c fastCall, ok bool) {
	var params []byte
	var version, method bool
	err := rawjson.Members(body, func(key, _, val []byte) error {
		switch string(key) {
		case "jsonrpc":
			version = string(val) == `"2.0"`
		case "method":
			method = string(val) == `"tools/call"`
		case "id":
			c.id = val
		case "params":
			params = val
		case "result", "error":
			return rawjson.ErrSyntax
		}
		return nil
	})
	if err != nil || !version || !method || params == nil {
		return fastCall{}, false
	}
	if c.key, c.id, ok = fastID(c.id); !ok {
		return fastCall{}, false
	}
	var meta []byte
	err = rawjson.Members(params, func(key, _, val []byte) error {
		switch string(key) {
		case "name":
			name, ok := rawjson.StringText(val)
			if !ok {
				return rawjson.ErrSyntax
			}
			c.name = name
		case "arguments":
			if string(val) != "null" {
				c.args = json.RawMessage(val)
			}
		case "_meta":
			if string(val) != "null" {
				meta = val
			}
		case "inputResponses", "requestState":
			// A retry carrying a client's input is the SDK's to read.
			return rawjson.ErrSyntax
		}
		return nil
	})
	if err != nil || c.name == "" {
		return fastCall{}, false
	}
	if meta == nil {
		return c, true
	}
	err = rawjson.Members(meta, func(key, _, val []byte) error {
		switch string(key) {
		case "progressToken":
			if len(val) == 0 || (val[0] != '"' && val[0] != '-' && (val[0] < '0' || val[0] > '9')) {
				return rawjson.ErrSyntax
			}
			// Carried as the client wrote it, never as a float64 that
			// would round 9007199254740993 (issue 36, finding 7); the
			// body is reused once the call is answered, so it is copied.
			if !json.Valid(val) {
				return rawjson.ErrSyntax
			}
			c.token = append(json.RawMessage(nil), val...)
			return nil
		case mcp.MetaKeyProtocolVersion:
			v, ok := rawjson.StringText(val)
			if !ok {
				return rawjson.ErrSyntax
			}
			c.version = v
		case mcp.MetaKeyClientCapabilities:
			if val[0] != '{' {
				return rawjson.ErrSyntax
			}
			c.caps = true
		case mcp.MetaKeyClientInfo:
			if val[0] != '{' {
				return rawjson.ErrSyntax
			}
		case mcp.MetaKeyLogLevel:
			if v, ok := rawjson.StringText(val); ok {
				c.logLevel = mcp.LoggingLevel(v)
			}
		}
		return nil
	})
	return c, err == nil
}

// serveFast answers r, a POST whose body is read, if the fast path can;
// it reports whether it did. rev is the revision of the request's header,
// modern whether the route serves it statelessly.
func (f *operator) serveFast(w http.ResponseWriter, r *http.Request, header string, modern bool, body []byte) bool {
	if f.noFast.Load() || r.Header.Get("Last-Event-ID") != "" || baseMediaType(r.Header.Get("Content-Type")) != "application/json" {
		return false
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	p, ok := principalFrom(r.Context())
	if !ok {
		return false
	}
	var sess *opSession
	if !modern {
		// A session is used as the seat that opened it, its answers to the
		// server's requests too: anyone else's request is the SDK's to
		// refuse.
		if sess = f.sessions.get(r.Header.Get("Mcp-Session-Id")); sess == nil || sess.user != p.Caller().Seat {
			return false
		}
		if f.answered(w, sess, body) {
			return true
		}
	}
	c, ok := readFastCall(body)
	if !modern && !ok {
		// Anything but a call the fast path answers is read as the SDK
		// reads it: a cancellation or the initialized notification.
		reqs := sdkRequests(body)
		if f.noteCancel(sess, cancelledIDs(reqs)) && len(reqs) == 1 {
			// A cancellation of a fast call alone is answered as the SDK
			// answers a notification (202), and not handed on: handed to
			// the SDK, which never had the call, it cancelled the next
			// call of that id the SDK served on the session, as soon as
			// it came (FuzzTransparency's spellings; a client may use an
			// id again once its call is over).
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		noteInitialized(sess, reqs)
	}
	if !ok {
		return false
	}
	if modern {
		// The SDK checks a 2026-07-28 request's headers against its body;
		// a request whose headers it would refuse is left to it.
		if c.version != header || !c.caps || r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != c.name {
			return false
		}
		if e, ok := CompanyRegistry(f.company).Resolve(c.name); ok && e.paramHeaders {
			return false
		}
	} else {
		if c.version != "" {
			return false
		}
		sess.mu.Lock()
		ready := sess.initialized && sess.timer != nil
		sess.mu.Unlock()
		if !ready {
			return false
		}
	}
	f.inflight.Add(1)
	defer f.inflight.Add(-1)
	f.fastCalls.Add(1)

	// A 2026-07-28 request is its whole exchange: its call ends when the
	// client hangs up. A 2025 session's call outlives its POST, as the
	// SDK's does, and ends on the client's notifications/cancelled or
	// with the session.
	ctx := r.Context()
	var cancel context.CancelFunc
	key := c.key
	if modern {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		sess.mu.Lock()
		if _, dup := sess.calls[key]; dup {
			sess.mu.Unlock()
			cancel()
			writeRPCError(w, http.StatusBadRequest, json.RawMessage(c.id), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: "duplicate in-flight request ID " + idText(c.id)})
			return true
		}
		if sess.calls == nil {
			sess.calls = map[jsonrpc.ID]context.CancelFunc{}
		}
		sess.calls[key] = cancel
		sess.mu.Unlock()
		defer func() {
			sess.mu.Lock()
			delete(sess.calls, key)
			sess.mu.Unlock()
		}()
	}
	defer cancel()

	st := newFastStream(w)
	down := &fastDown{f: f, st: st, token: c.token, caller: p.TokenID, sess: sess, level: c.logLevel, modern: modern, call: ctx, stream: r.Context()}
	ctx = upstream.WithDownstream(ctx, cleanDownstream(f.router.clean, f.log, down))
	if modern {
		// A server's input requests go to the client in the answer; its
		// answers come in a call the SDK reads (readFastCall).
		ctx = withClientRound(ctx, firstRound)
	}
	var a answer
	var session string
	if sess != nil {
		session = sess.id
	}
	done, refused := f.startCall(p, session)
	if refused == nil {
		defer done()
	}
	if refused != nil {
		a = answer{res: servers.Refused(refused)}
	} else if caller, err := keyedCaller(p.Caller(), r.Header); err != nil {
		a = answer{res: servers.Refused(keyRefusal(err))}
	} else {
		a = f.router.callForPerson(ctx, CompanyRegistry(f.company), caller, c.name, c.args)
	}
	msg, err := f.response(c.id, a, modern)
	if err != nil {
		f.log.Error("tool_answer_unwritable", "tool", c.name, "error", err.Error())
		msg, _ = f.response(c.id, answer{res: servers.Refused(authority.Internal())}, modern)
	}
	st.final(msg)
	return true
}

// idText is an id as the SDK names it in an error: a string unquoted.
func idText(id []byte) string {
	if s, ok := rawjson.StringText(id); ok {
		return s
	}
	return string(id)
}

// response writes the JSON-RPC response carrying a call's answer, as the
// SDK writes it for the revision: a 2026-07-28 result names the server in
// its _meta.
func (f *operator) response(id []byte, a answer, modern bool) ([]byte, error) {
	size := 256 + len(id)
	if op := a.onePass; op != nil {
		// Sized once: a page of results grown by doubling cost more
		// allocation than the page itself.
		size += len(op.Content) + len(op.Structured) + len(op.Meta) + len(f.serverInfo)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	if a.onePass != nil {
		op := *a.onePass
		if modern {
			op.Meta = withServerInfo(op.Meta, f.serverInfo)
			op.Complete, op.Protocol = resultTypeOf(op.Protocol)
		}
		b = op.AppendJSON(b)
		return append(b, '}'), nil
	}
	res := a.res
	if modern {
		out := *res
		out.Meta = mcp.Meta{}
		for k, v := range res.Meta {
			out.Meta[k] = v
		}
		if _, ok := out.Meta[mcp.MetaKeyServerInfo]; !ok {
			out.Meta[mcp.MetaKeyServerInfo] = f.impl
		}
		res = typedResult(&out)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	b = append(b, body...)
	return append(b, '}'), nil
}

// withServerInfo is a result's _meta (nil: none) with the hub's
// implementation added, as the SDK names the server in a 2026-07-28
// result. The sanitiser has dropped any the upstream wrote.
func withServerInfo(meta, serverInfo []byte) []byte {
	m := bytes.TrimSpace(meta)
	if len(m) < 2 || len(bytes.TrimSpace(m[1:len(m)-1])) == 0 {
		return append(append([]byte(`{"`+mcp.MetaKeyServerInfo+`":`), serverInfo...), '}')
	}
	// A non-empty object: its members, then the server's name.
	out := make([]byte, 0, len(m)+len(serverInfo)+48)
	out = append(out, m[:len(m)-1]...)
	out = append(out, `,"`+mcp.MetaKeyServerInfo+`":`...)
	out = append(out, serverInfo...)
	return append(out, '}')
}

// fastStream is the event stream a fast call answers on: the SDK's framing,
// one event per message, each flushed as it is written. Messages a call
// sends after its answer (a late log line) are dropped, as the SDK drops
// them once a request's stream is done.
type fastStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	mu   sync.Mutex
	open bool // headers written
	done bool
	buf  []byte
}

func newFastStream(w http.ResponseWriter) *fastStream {
	if cw, ok := w.(codedWriter); ok {
		// The fast path writes no error of code 0 for codedWriter to mend.
		w = cw.ResponseWriter
	}
	return &fastStream{w: w, rc: http.NewResponseController(w)}
}

func (s *fastStream) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errStreamDone
	}
	return s.writeLocked(msg)
}

// final writes the call's answer and ends the stream. An answer that is
// the stream's only message is written with its length, unflushed: the
// server then sends headers and body in one write, with no chunk framing
// and no second write to end it.
func (s *fastStream) final(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	if s.open {
		_ = s.writeLocked(msg)
		return
	}
	s.header()
	s.buf = s.event(msg)
	s.w.Header().Set("Content-Length", strconv.Itoa(len(s.buf)))
	_, _ = s.w.Write(s.buf)
}

func (s *fastStream) header() {
	h := s.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	s.open = true
}

// event frames msg as the SDK frames a message, in s.buf.
func (s *fastStream) event(msg []byte) []byte {
	const head, tail = "event: message\ndata: ", "\n\n"
	b := s.buf[:0]
	if n := len(head) + len(msg) + len(tail); cap(b) < n {
		b = make([]byte, 0, n)
	}
	b = append(b, head...)
	b = append(b, msg...)
	return append(b, tail...)
}

func (s *fastStream) writeLocked(msg []byte) error {
	if !s.open {
		s.header()
	}
	s.buf = s.event(msg)
	_, err := s.w.Write(s.buf)
	_ = s.rc.Flush()
	return err
}

var errStreamDone = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call this message belongs to has been answered"}

// notification writes a notification's JSON-RPC message.
func notification(method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(p)+64)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, p...)
	return append(b, '}'), nil
}

// accepts reads an Accept header as the SDK does: whether it takes JSON and
// whether it takes an event stream.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(raw, ";")
			switch base = strings.TrimSpace(base); {
			case strings.EqualFold(base, "application/json"), strings.EqualFold(base, "application/*"):
				jsonOK = true
			case strings.EqualFold(base, "text/event-stream"), strings.EqualFold(base, "text/*"):
				streamOK = true
			case base == "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// baseMediaType is a Content-Type without its parameters, lower case
// (as written, with no copy, when it already is).
func baseMediaType(v string) string {
	base, _, _ := strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(base))
}
