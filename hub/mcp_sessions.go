//lint:file-ignore SA1019 a hub forwards logging (deprecated in 2026-07-28, SEP-2577) for clients of the session revisions, which still use it.

package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hub's own record of the 2025 operator sessions. The SDK keeps its
// sessions to itself; the fast path (mcp_fast.go) answers tools/call on a
// session without the SDK, so the hub records what that needs as the SDK
// sees it happen: the session opened (initialize) and by whom, the
// client's initialized notification, the log level it asked for. It also
// keeps the idle timeout the SDK kept, since the SDK no longer sees every
// request of a session: a session no POST has used for SessionIdle is
// closed, a POST in flight holding the timer off.
//
// A session whose client is gone is kept only for SessionGrace: one that
// sent nothing past its handshake (initialize, the initialized
// notification), and one whose client's event stream (its GET) ended with
// nothing open since. A client that exits without a DELETE, as the MCP
// Inspector does after each command, ends its stream as it goes; a client
// still there opens it again or sends a request well within the grace,
// and is kept for SessionIdle once more.
//
// A session leaves the table when it is closed: by its idle timer, by the
// client's DELETE, by the hub's close, or, in a fleet, when its record
// leaves the fleet's bucket (its client's DELETE through another node; the
// record's life run out). The SDK closes a streamable session for no other
// reason.

type opSession struct {
	id   string
	user string // the login the session was opened with
	ss   *mcp.ServerSession
	caps *mcp.ClientCapabilities

	mu          sync.Mutex
	initialized bool
	logLevel    mcp.LoggingLevel
	// calls are the fast calls in flight, by their JSON-RPC id as the SDK
	// keys a call (fastID), each with what cancels it.
	calls map[jsonrpc.ID]context.CancelFunc
	// asked are the requests fast calls made of the client, by id,
	// awaiting its answer.
	asked map[string]chan json.RawMessage
	next  int // numbers those requests
	// refs counts POSTs in flight; timer closes the session once it has
	// stood idle, nil once the session is closed.
	refs  int
	timer *time.Timer
	// streams counts the client's GET streams open; engaged says the
	// client used the session past its handshake and has not left since
	// (its last stream ended): an engaged session is kept for the table's
	// idle, any other for its grace.
	streams int
	engaged bool
	// rec is the session as the fleet records it, and stored when this
	// node last wrote it (mcp_sessions_fleet.go); serve, for a session
	// this node took up from the fleet, is what serves it in the SDK's
	// stead.
	rec    sessionRecord
	stored time.Time
	serve  http.Handler
}

type sessionTable struct {
	idle, grace time.Duration
	mu          sync.Mutex
	byID        map[string]*opSession
	// closed, if set, is told each session id leaving the table, once
	// (the caps per credential give its slot back).
	closed func(id string)
	// fleet records the sessions for the fleet's other nodes; nil alone.
	fleet *fleetSessions
}

// newSessionTable keeps a session in use for idle, one whose client sent
// nothing past its handshake or left for grace (never longer than idle).
func newSessionTable(idle, grace time.Duration) *sessionTable {
	if grace <= 0 || grace > idle {
		grace = idle
	}
	return &sessionTable{idle: idle, grace: grace, byID: map[string]*opSession{}}
}

// wait is how long s may stand idle now; s.mu is held.
func (t *sessionTable) wait(s *opSession) time.Duration {
	if s.engaged || s.streams > 0 {
		return t.idle
	}
	return t.grace
}

// opened records a session whose initialize succeeded, and in a fleet
// records it in the fleet's bucket before its client learns its id.
func (t *sessionTable) opened(ctx context.Context, ss *mcp.ServerSession, rec sessionRecord) {
	id := ss.ID()
	if id == "" {
		return
	}
	s := &opSession{id: id, user: rec.User, ss: ss, caps: rec.Caps, rec: rec}
	s.timer = time.AfterFunc(t.grace, func() { t.close(s) })
	t.mu.Lock()
	t.byID[id] = s
	t.mu.Unlock()
	if t.fleet != nil {
		t.fleet.put(ctx, s)
	}
}

func (t *sessionTable) get(id string) *opSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// close ends a session and forgets it: its idle timer, the fast calls in
// flight on it (as the SDK ends its own handlers when a session closes),
// the SDK's session.
func (t *sessionTable) close(s *opSession) {
	t.forget(s)
	_ = s.ss.Close()
}

// forget drops a session the SDK has closed (or is closing).
func (t *sessionTable) forget(s *opSession) {
	t.mu.Lock()
	left := t.byID[s.id] == s
	if left {
		delete(t.byID, s.id)
	}
	t.mu.Unlock()
	if left && t.closed != nil {
		t.closed(s.id)
	}
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	calls := s.calls
	s.calls = nil
	s.mu.Unlock()
	for _, cancel := range calls {
		cancel()
	}
}

// closeAll ends every session, as the hub closes.
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	all := make([]*opSession, 0, len(t.byID))
	for _, s := range t.byID {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		t.forget(s)
	}
}

// startPOST holds the idle timer off while a POST of the session runs. A
// POST after the initialized notification engages the session: the
// handshake's own (that notification) does not.
func (s *opSession) startPOST() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return
	}
	if s.initialized {
		s.engaged = true
	}
	if s.refs == 0 {
		s.timer.Stop()
	}
	s.refs++
}

// endPOST starts the idle timer again once no POST of the session runs.
func (t *sessionTable) endPOST(s *opSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return
	}
	if s.refs--; s.refs == 0 {
		s.timer.Reset(t.wait(s))
	}
}

// startStream engages the session while the client's GET stream is open.
func (t *sessionTable) startStream(s *opSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return
	}
	s.streams++
	s.engaged = true
	if s.refs == 0 {
		s.timer.Reset(t.idle)
	}
}

// endStream is a GET of the session ending; a stream was served if it was
// answered 200, not refused at once. The last stream ending is the client
// gone, until it comes back: only the grace is left.
func (t *sessionTable) endStream(s *opSession, w *statusWriter) {
	served := w.status == http.StatusOK
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return
	}
	if s.streams--; s.streams == 0 && served {
		s.engaged = false
		if s.refs == 0 {
			s.timer.Reset(t.grace)
		}
	}
}

// track registers a session's POSTs around next, holding its idle timer
// off while they run; a DELETE the SDK answers with 204 has closed it. A
// GET, the session's stream, is mcpEndpoint's (startStream, endStream).
func (t *sessionTable) track(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) {
	s := t.get(r.Header.Get("Mcp-Session-Id"))

	switch {
	case s == nil:
		next(w, r)
	case r.Method == http.MethodPost:
		s.startPOST()
		defer t.endPOST(s)
		if t.fleet != nil {
			t.fleet.renew(r.Context(), s)
			defer t.fleet.renewing(s)()
		}
		next(w, r)
	case r.Method == http.MethodDelete:
		sw := &statusWriter{ResponseWriter: w}
		next(sw, r)
		if sw.status == http.StatusNoContent {
			t.forget(s)
			if t.fleet != nil {
				// Ended on every node, not only this one.
				t.fleet.remove(r.Context(), s.id)
			}
		}
	default:
		next(w, r)
	}
}

// sessionMiddleware keeps the table as the SDK serves each session's
// opening, its initialized notification and its log level.
func (f *operator) sessionMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok || ss.ID() == "" {
			return res, err
		}
		if err != nil {
			// A session this node took up from the fleet was connected
			// initialized, so the SDK calls the client's notification a
			// duplicate: it is the first this node has seen.
			if s := f.sessions.get(ss.ID()); method != "notifications/initialized" || s == nil || s.serve == nil {
				return res, err
			}
		}
		switch method {
		case "initialize":
			var rec sessionRecord
			if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
				rec.User = ex.TokenInfo.UserID
			}
			if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && ip != nil {
				rec.Caps, rec.Client = ip.Capabilities, ip.ClientInfo
			}
			if ir, ok := res.(*mcp.InitializeResult); ok && ir != nil {
				rec.Revision = ir.ProtocolVersion
			}
			f.sessions.opened(ctx, ss, rec)
		case "notifications/initialized":
			if s := f.sessions.get(ss.ID()); s != nil {
				s.mu.Lock()
				s.initialized = true
				s.rec.Initialized = true
				s.mu.Unlock()
				if f.sessions.fleet != nil {
					// The node that opened it learns it too, and
					// answers the session's calls on its fast path.
					f.sessions.fleet.put(ctx, s)
				}
			}
		case "logging/setLevel":
			if s := f.sessions.get(ss.ID()); s != nil {
				if lp, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && lp != nil {
					s.mu.Lock()
					s.logLevel = lp.Level
					s.rec.Level = lp.Level
					s.mu.Unlock()
					if f.sessions.fleet != nil {
						// Every node serving the session logs at it.
						f.sessions.fleet.put(ctx, s)
					}
				}
			}
		}
		return res, err
	}
}
