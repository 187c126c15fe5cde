package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The /operator/mcp route: what the hub checks of a request before either
// of the SDK's handlers sees it, and which of them serves it.

// modernProtocol is the first MCP revision without sessions. Requests of it
// are served by a stateless handler; older revisions by a stateful one.
var modernProtocol = mustRevision("2026-07-28")

// revision is an MCP protocol revision, a date. Revisions are compared as
// dates, never as strings: "zzz" sorts after every date, and must not be
// taken for a revision newer than any.
type revision struct{ t time.Time }

func parseRevision(s string) (revision, bool) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil || t.Format(time.DateOnly) != s {
		return revision{}, false
	}
	return revision{t}, true
}

func mustRevision(s string) revision {
	r, ok := parseRevision(s)
	if !ok {
		panic("hub: not a protocol revision: " + s)
	}
	return r
}

func (r revision) atLeast(o revision) bool { return !r.t.Before(o.t) }

// mcpEndpoint serves /operator/mcp: guard's and authenticate's checks,
// then a GET (a session's event stream) here, and every other method to
// the session table and route, which check what the SDK would take on
// trust (the revision header, a batch opening a session), bound and read a
// POST body, and pick the handler for the request's revision.
//
// A 2025 session's event stream holds the goroutine serving its GET for as
// long as the session lasts, with every frame beneath the SDK's handler on
// its stack, and the runtime halves a stack at a collection only while
// less than a quarter of it is in use: under 3.3 KiB of frames, the stream
// lives on 8 KiB of stack; over it, on 16. So the checks are made in turn,
// not nested as middleware, the endpoint is the mux's handler itself (no
// HandlerFunc and method-value frames), and a GET is served in this one
// frame. TestIdleSessionStacksStayHalved measures it on a real hub; the
// budget left is small, so a frame added on this path is for that test to
// judge (docs/performance.md, the idle session).
type mcpEndpoint struct{ f *operator }

func (e mcpEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := e.f
	if !f.guarded(w, r) {
		return
	}
	r, served := f.authenticated(w, r)
	if r == nil {
		return
	}
	defer served()
	if !f.adopted(w, r) {
		return
	}
	w = codedWriter{w}
	if r.Method != http.MethodGet {
		f.sessions.track(w, r, f.route)
		return
	}
	// The stream is held in the session table while it is open, as track
	// holds a session's other requests, and counted against its credential
	// (caps.go); a GET of 2026-07-28 goes to the stateless handler, which
	// has no stream to give. A session taken up from another node of the
	// fleet has a handler of its own (mcp_sessions_fleet.go).
	var h http.Handler = f.stateful
	if s := f.sessions.get(r.Header.Get("Mcp-Session-Id")); s != nil {
		closed, ok := f.openingStream(w, r)
		if !ok {
			return
		}
		defer closed()
		if s.serve != nil {
			h = s.serve
		}
		f.sessions.startStream(s)
		sw := &statusWriter{ResponseWriter: w}
		defer f.sessions.endStream(s, sw)
		w = sw
	}
	if header := r.Header.Get("Mcp-Protocol-Version"); header != "" {
		rev, ok := f.checkRevision(w, header)
		if !ok {
			return
		}
		if rev.atLeast(modernProtocol) {
			f.stateless.ServeHTTP(w, r)
			return
		}
	}
	h.ServeHTTP(w, r)
}

func (f *operator) route(w http.ResponseWriter, r *http.Request) {
	header := r.Header.Get("Mcp-Protocol-Version")
	var rev revision
	if header != "" {
		var ok bool
		if rev, ok = f.checkRevision(w, header); !ok {
			return
		}
	}
	if r.Method != http.MethodPost {
		// A DELETE ends a session (a GET is mcpEndpoint's).
		if header != "" && rev.atLeast(modernProtocol) {
			f.stateless.ServeHTTP(w, r)
			return
		}
		f.serveStateful(w, r)
		return
	}
	limit := f.opts.MaxBodyBytes
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	buf := bodies.Get().(*bytes.Buffer)
	defer putBody(buf)
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return
	}
	if isBatch(body) && r.Header.Get("Mcp-Session-Id") == "" {
		// Under 2025-03-26, the one revision with batches, a session is
		// opened by an initialize request sent on its own; later revisions
		// have no batches at all. The SDK would open a session for one.
		writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "A JSON-RPC batch (an array) cannot open a session: send initialize on its own. " +
				"Batches are accepted only inside a 2025-03-26 session; MCP 2025-06-18 and later have none."})
		return
	}
	isModern := modern(header, rev, r.Header, body)
	if f.serveFast(w, r, header, isModern, body) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if toks := spelledTokens(body); toks != nil {
		r = r.WithContext(context.WithValue(r.Context(), spelledTokensKey{}, toks))
	}
	if isModern {
		f.stateless.ServeHTTP(w, r)
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" {
		// A POST with no session may open one (an initialize): counted
		// against its credential before the SDK opens it.
		done, ok := f.openingSession(w, r)
		if !ok {
			return
		}
		defer done()
	}
	f.serveStateful(w, r)
}

// spoken are the revisions this hub speaks, read once: every request names
// one.
var spoken = func() map[string]revision {
	m := map[string]revision{}
	for _, v := range mcp.SupportedProtocolVersions() {
		if r, ok := parseRevision(v); ok {
			m[v] = r
		}
	}
	return m
}()

// bodies holds request bodies for reuse: a body is read, routed, and done
// with when its request is answered (the SDK reads its own copy).
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBody gives a body back, unless it grew past what most requests need.
func putBody(b *bytes.Buffer) {
	if b.Cap() > 64<<10 {
		return
	}
	b.Reset()
	bodies.Put(b)
}

// checkRevision refuses a revision header that is not a date, or names a
// revision this hub does not speak, saying which it does.
func (f *operator) checkRevision(w http.ResponseWriter, header string) (revision, bool) {
	if r, ok := spoken[header]; ok {
		return r, true
	}
	supported := mcp.SupportedProtocolVersions()
	// The header is the client's to choose and may be long: it is quoted
	// only when it is short enough to be a revision at all.
	named := "the Mcp-Protocol-Version header"
	if len(header) <= len("2006-01-02")+8 {
		named = fmt.Sprintf("the Mcp-Protocol-Version header %q", header)
	}
	rev, ok := parseRevision(header)
	var msg string
	switch {
	case !ok:
		msg = fmt.Sprintf("%s is not an MCP protocol revision (a date such as 2025-11-25); this hub speaks %s.", named, strings.Join(supported, ", "))
	case !slices.Contains(supported, header):
		msg = fmt.Sprintf("%s names a revision this hub does not speak; it speaks %s.", named, strings.Join(supported, ", "))
	default:
		return rev, true
	}
	requested := header
	if len(requested) > 64 {
		requested = ""
	}
	data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: supported, Requested: requested})
	writeRPCError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: msg, Data: data})
	return revision{}, false
}

// modern reports whether a POST speaks 2026-07-28 or later: by its header,
// or, for a first request without one, by the revision in its _meta.
func modern(header string, rev revision, h http.Header, body []byte) bool {
	if header != "" {
		return rev.atLeast(modernProtocol)
	}
	if h.Get("Mcp-Session-Id") != "" {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	r, ok := parseRevision(v)
	return ok && r.atLeast(modernProtocol)
}

// isBatch reports a body whose JSON is an array.
func isBatch(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// writeRPCError answers a JSON-RPC error outside any session. id is nil
// when the request's id is not known.
func writeRPCError(w http.ResponseWriter, status int, id any, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, e})
}
