//lint:file-ignore SA1019 a 2025 session's log level (logging, deprecated in 2026-07-28, SEP-2577) travels with it.

package hub

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/servers/state"
)

// Any node of a fleet serves any request of any 2025 operator session
// (issue 39, build 1; the argument is in docs/fleet-sessions.md).
//
// Nothing but bookkeeping ties a session to the node that opened it: every
// call is decided by the credential on its own request (OPS-1). What a node
// needs to serve a session it has not seen is what the client said when it
// opened it — the revision agreed, its capabilities and its name — and the
// log level it asked for since. The id says the session is one the fleet
// issued: it is signed with the fleet's sessions key (shared by every node,
// kept sealed in the fleet's keys bucket, state.FleetKeys), so a node
// refuses a forged or altered id at once, in words, without asking anyone.
// The rest is a record in the fleet's sessions bucket, written when the
// session opens and when its log level changes, read by a node the first
// time a request of the session reaches it. That node then connects the
// session to its own SDK server from the record, and serves it from then
// on as its own: its event stream gets the catalogue changes the node
// pushes, and each call's notes go on that call's own stream.
//
// A server's request to the client in the middle of a call (sampling,
// elicitation, roots) goes out on the call's stream, from the node serving
// the call, and the client answers in a POST of its own that a balancer
// may give any node. The request's id names the node that asked
// (askPrefix + node + "." + n), and a node given an answer to another's
// request sends it there over the fleet's bus.
//
// Every node follows the bucket: a log level set through one node reaches
// the copies the others hold, and a session ended by its client's DELETE
// on one node is closed on all. A record lives as long as the session's
// idle timeout and a quarter, renewed by each node that serves the
// session once a quarter of the idle timeout has passed since it last
// wrote it, so a session in use never loses it.

// sessionsBucket records the fleet's 2025 operator sessions.
const sessionsBucket = "CREWLET_OPERATOR_SESSIONS"

// sessionIDs mints and checks session ids: 16 random bytes and the first
// 16 of their HMAC-SHA256 under the sessions key, base64url (43
// characters, all visible ASCII as the transport asks).
type sessionIDs struct{ key []byte }

const sessionIDRandom, sessionIDMAC = 16, 16

func (k sessionIDs) mac(r []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("crewlet operator session\x00"))
	m.Write(r)
	return m.Sum(nil)[:sessionIDMAC]
}

// mint is the SDK's GetSessionID.
func (k sessionIDs) mint() string {
	b := make([]byte, sessionIDRandom, sessionIDRandom+sessionIDMAC)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(append(b, k.mac(b)...))
}

// valid reports an id this fleet (or this node, alone) issued.
func (k sessionIDs) valid(id string) bool {
	// Strict: the unused bits of the last character must be zero, so no
	// other spelling of an issued id passes for it.
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil || len(b) != sessionIDRandom+sessionIDMAC {
		return false
	}
	return hmac.Equal(b[sessionIDRandom:], k.mac(b[:sessionIDRandom]))
}

// sessionRecord is what a node needs of a session it did not open.
type sessionRecord struct {
	User     string                  `json:"user"`
	Revision string                  `json:"revision"`
	Caps     *mcp.ClientCapabilities `json:"capabilities,omitempty"`
	Client   *mcp.Implementation     `json:"client,omitempty"`
	Level    mcp.LoggingLevel        `json:"log_level,omitempty"`
	// Initialized says the client's initialized notification has reached
	// a node: the node that opened the session may not have seen it.
	Initialized bool `json:"initialized,omitempty"`
}

// fleetSessions is a node's part in the fleet's sessions bucket: it
// writes the sessions this node opens, reads those it has not seen, and
// follows the bucket for the sessions it holds. Its one goroutine (the
// watch) is ended by close.
type fleetSessions struct {
	b    *state.TTLBucket
	ttl  time.Duration
	log  *slog.Logger
	stop context.CancelFunc
	wg   sync.WaitGroup
	// node names this node; bus carries the answers to requests of the
	// client a node did not ask, to the node that did, until unsub.
	node  string
	bus   Bus
	unsub func()
}

// openFleetSessions opens the bucket and follows it for the sessions t
// holds.
func openFleetSessions(ctx context.Context, f *Fleet, t *sessionTable, log *slog.Logger) (*fleetSessions, error) {
	b, err := f.Buckets.TTLBucket(ctx, sessionsBucket)
	if err != nil {
		return nil, err
	}
	unsub, err := f.Bus.Subscribe(answerSubject+f.Node, func(data []byte) { deliverAnswer(t, data) })
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := b.Watch(wctx, ">")
	if err != nil {
		stop()
		unsub()
		return nil, err
	}
	// A copy of the session lives until idle after its last POST, which
	// came at most a quarter of idle after its node last wrote the record
	// (renew): the record outlives every copy in use.
	fs := &fleetSessions{b: b, ttl: t.idle + t.idle/4, log: log, stop: stop, node: f.Node, bus: f.Bus, unsub: unsub}
	fs.wg.Add(1)
	go func() {
		defer fs.wg.Done()
		defer w.Stop()
		fs.follow(wctx, w, t)
	}()
	return fs, nil
}

// follow applies each change of the bucket to the session this node holds
// under its key, if any: a new log level, or the session gone (its
// client's DELETE through another node).
func (fs *fleetSessions) follow(ctx context.Context, w *state.TTLWatch, t *sessionTable) {
	for {
		e, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				// Sessions still work here; only what another node does
				// to them (a DELETE, a log level) no longer reaches this
				// one until it restarts.
				fs.log.Error("operator_sessions_unfollowed", "error", err.Error(),
					"reason", "this node no longer hears of sessions ended or changed through other nodes")
			}
			return
		}
		s := t.get(e.Key)
		if s == nil {
			continue
		}
		if e.Gone {
			// Closing waits for the session's requests in flight: on a
			// goroutine of its own, so one session's call does not hold
			// back what the bucket says of every other.
			fs.wg.Go(func() { t.close(s) })
			continue
		}
		var rec sessionRecord
		if json.Unmarshal(e.Value, &rec) != nil {
			continue
		}
		s.mu.Lock()
		s.logLevel = rec.Level
		s.initialized = s.initialized || rec.Initialized
		s.rec = rec
		s.mu.Unlock()
	}
}

func (fs *fleetSessions) close() {
	if fs == nil {
		return
	}
	fs.unsub()
	fs.stop()
	fs.wg.Wait()
}

// answerSubject prefixes the answers sent to a node: answerSubject + node.
const answerSubject = "crewlet.session.answer."

// sessionAnswer is a client's answer to a request another node asked.
type sessionAnswer struct {
	Session string          `json:"session"`
	ID      string          `json:"id"`
	Body    json.RawMessage `json:"body"`
}

// askID is the id of the n-th request this node asks a client.
func (fs *fleetSessions) askID(n int) string {
	return askPrefix + fs.node + "." + strconv.Itoa(n)
}

// forward sends a client's answer (body) to a request asked by another
// node (id, JSON as the client wrote it) to that node; ours is false if
// the id names no other node, err says the answer could not be sent.
func (fs *fleetSessions) forward(s *opSession, id, body []byte) (ours bool, err error) {
	var text string
	if json.Unmarshal(id, &text) != nil {
		return false, nil
	}
	rest, ok := strings.CutPrefix(text, askPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 || rest[:i] == fs.node {
		return false, nil
	}
	b, err := json.Marshal(sessionAnswer{Session: s.id, ID: string(id), Body: body})
	if err == nil {
		err = fs.bus.Publish(answerSubject+rest[:i], b)
	}
	if err != nil {
		fs.log.Warn("operator_answer_unforwarded", "node", rest[:i], "error", err.Error())
	}
	return true, err
}

// deliverAnswer hands an answer another node was given to the request of
// this node's that it answers, if it still waits.
func deliverAnswer(t *sessionTable, data []byte) {
	var a sessionAnswer
	if json.Unmarshal(data, &a) != nil {
		return
	}
	s := t.get(a.Session)
	if s == nil {
		return
	}
	s.mu.Lock()
	ch, ok := s.asked[a.ID]
	s.mu.Unlock()
	if !ok {
		return
	}
	select {
	case ch <- a.Body:
	default:
	}
}

// put writes s's record, marking when, so the next POST knows when to
// renew it.
func (fs *fleetSessions) put(ctx context.Context, s *opSession) {
	ctx, cancel := context.WithTimeout(ctx, sessionWait)
	defer cancel()
	s.mu.Lock()
	rec := s.rec
	s.mu.Unlock()
	b, err := json.Marshal(rec)
	if err == nil {
		err = fs.b.Put(ctx, s.id, b, fs.ttl)
	}
	if err != nil {
		// The session still works on this node; only another node could
		// not take it up. The id is no secret worth hiding, but it is a
		// handle: the log names none.
		fs.log.Warn("operator_session_unrecorded", "error", err.Error(),
			"reason", "another node of the fleet cannot serve this session's requests until it is recorded")
		return
	}
	s.mu.Lock()
	s.stored = time.Now()
	s.mu.Unlock()
}

// renew writes s's record again once a quarter of the idle timeout (a
// fifth of the record's life) has passed since this node last wrote it.
//
// It is marked written before it is written: a write that fails (a bucket
// electing a leader) is not tried again by every request of the session,
// each waiting out sessionWait, but at the next renewal.
func (fs *fleetSessions) renew(ctx context.Context, s *opSession) {
	s.mu.Lock()
	due := time.Since(s.stored) > fs.ttl/5
	if due {
		s.stored = time.Now()
	}
	s.mu.Unlock()
	if due {
		fs.extend(ctx, s)
	}
}

// extend writes s's record again as the bucket holds it, only if nobody
// has written it since it was read: a renewal extends the record's life
// and changes nothing of it. Written from this node's copy, it could put
// back a log level another node had just set, or a record the client's
// DELETE through another node had just removed. A record gone is left
// gone (its session closes on every node); one written meanwhile was
// renewed by that write.
func (fs *fleetSessions) extend(ctx context.Context, s *opSession) {
	ctx, cancel := context.WithTimeout(ctx, sessionWait)
	defer cancel()
	e, err := fs.b.Get(ctx, s.id)
	if err == nil {
		_, err = fs.b.Renew(ctx, s.id, e.Value, fs.ttl, e.Revision)
	}
	switch {
	case err == nil, errors.Is(err, state.ErrKeyMoved):
		s.mu.Lock()
		s.stored = time.Now()
		s.mu.Unlock()
	case errors.Is(err, state.ErrNoKey):
	default:
		fs.log.Warn("operator_session_unrenewed", "error", err.Error(),
			"reason", "the session's record may run out while the session is in use; another write of it renews it")
	}
}

// renewing keeps s's record written while one of its POSTs runs: a call
// may outlast the record's life (the idle timeout and a quarter; a server's
// call timeout may be an hour), and a record run out closes the session on
// every node, that call with it. stop ends it, and returns once no write
// of it is under way.
func (fs *fleetSessions) renewing(s *opSession) (stop func()) {
	every := fs.ttl / 5
	var (
		mu      sync.Mutex
		stopped bool
		writing sync.WaitGroup
		timer   *time.Timer
	)
	writing.Add(1)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(every, func() {
		defer writing.Done()
		fs.renew(context.Background(), s)
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			writing.Add(1)
			timer.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		if timer.Stop() {
			writing.Done()
		}
		mu.Unlock()
		writing.Wait()
	}
}

// remove drops a session's record: its client ended it.
//
// Bounded like every read and write of the records (sessionWait): the
// request's own context has no deadline, and a bucket electing a leader
// after a node's death held a client's DELETE with it for good.
//
// Not bound to the request either: a client that exits as soon as it has
// sent its DELETE would otherwise leave the record behind, and the other
// nodes serving the session it ended. A renew written between the read and
// the delete moves the record; it is read again.
func (fs *fleetSessions) remove(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionWait)
	defer cancel()
	var err error
	for {
		var e state.TTLEntry
		if e, err = fs.b.Get(ctx, id); err == nil {
			err = fs.b.Delete(ctx, id, e.Revision)
		}
		if !errors.Is(err, state.ErrKeyMoved) || ctx.Err() != nil {
			break
		}
	}
	if err != nil && !errors.Is(err, state.ErrNoKey) {
		fs.log.Warn("operator_session_unremoved", "error", err.Error(),
			"reason", "the other nodes of the fleet keep their copies until they stand idle")
	}
}

// sessionWait bounds reading or writing a session's record: the bucket
// answers in milliseconds, or is electing a leader.
const sessionWait = 5 * time.Second

// adopt makes the session a request names one this node serves, if the
// fleet issued it and it is open: it reports false when it has answered
// the request itself, refused.
func (f *operator) adopt(w http.ResponseWriter, r *http.Request, id string) bool {
	if f.sessions.get(id) != nil {
		return true
	}
	if !f.sessionIDs.valid(id) {
		http.Error(w, "This Mcp-Session-Id was not issued by this hub (it is not one of the ids its nodes sign, or it was altered): "+
			"open a new session with initialize.", http.StatusNotFound)
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionWait)
	defer cancel()
	e, err := f.sessions.fleet.b.Get(ctx, id)
	if errors.Is(err, state.ErrNoKey) {
		http.Error(w, fmt.Sprintf("This session has ended: its client closed it, or it went unused for %s. Open a new session with initialize.",
			f.sessions.idle), http.StatusNotFound)
		return false
	}
	var rec sessionRecord
	if err == nil {
		err = json.Unmarshal(e.Value, &rec)
	}
	if err != nil {
		f.log.Warn("operator_session_unread", "error", err.Error())
		http.Error(w, "This hub node could not read the session's record from the fleet just now: send the request again.",
			http.StatusServiceUnavailable)
		return false
	}
	p, ok := principalFrom(r.Context())
	if !ok || p.Caller().Seat != rec.User {
		http.Error(w, sessionUserMismatch, http.StatusForbidden)
		return false
	}
	// A session taken up holds a slot of the credential's sessions cap, as
	// one opened here does: a session this node closed (its grace, its
	// idle time) whose record lives on would otherwise come back free of
	// the cap.
	if !f.holdSession(w, p) {
		return false
	}
	transport := &mcp.StreamableServerTransport{SessionID: id}
	ss, err := f.server.Connect(context.WithoutCancel(r.Context()), transport, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{
		InitializeParams:          &mcp.InitializeParams{ProtocolVersion: rec.Revision, Capabilities: rec.Caps, ClientInfo: rec.Client},
		InitializedParams:         &mcp.InitializedParams{},
		NegotiatedProtocolVersion: rec.Revision,
		LogLevel:                  rec.Level,
	}})
	if err != nil {
		f.caps.sessions.give(p.TokenID)
		f.log.Error("operator_session_unadopted", "error", err.Error())
		http.Error(w, "This hub node could not take up the session: send the request again.", http.StatusServiceUnavailable)
		return false
	}
	user := rec.User
	serve := f.sdkAuth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// As the SDK's handler checks every request of a session it
		// opened: a session is used as the seat that opened it.
		if ti := auth.TokenInfoFromContext(r.Context()); ti == nil || ti.UserID != user {
			http.Error(w, sessionUserMismatch, http.StatusForbidden)
			return
		}
		if r.Method == http.MethodDelete {
			_ = ss.Close()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		transport.ServeHTTP(w, r)
	}))
	if !f.sessions.adopted(ss, rec, serve) {
		// Another request of the session took it up first, with its slot.
		_ = ss.Close()
		f.caps.sessions.give(p.TokenID)
		return true
	}
	f.bindSession(id, p.TokenID)
	return true
}

// sessionUserMismatch refuses a request of a session opened as another
// seat.
const sessionUserMismatch = "This session was opened with a credential of another seat; a session is used with the credential of the seat that opened it."

// adopted records a session this node took up from the fleet, served by
// serve; false if the table holds the id already.
func (t *sessionTable) adopted(ss *mcp.ServerSession, rec sessionRecord, serve http.Handler) bool {
	// stored is left zero: this node has not written the record, which
	// may be near the end of its life, so the session's next POST here
	// writes it again (renew).
	s := &opSession{id: ss.ID(), user: rec.User, ss: ss, caps: rec.Caps, initialized: true, logLevel: rec.Level, rec: rec, serve: serve}
	s.timer = time.AfterFunc(t.grace, func() { t.close(s) })
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[s.id] != nil {
		s.timer.Stop()
		return false
	}
	t.byID[s.id] = s
	return true
}

// adopted takes up on this node a 2025 session another node of the fleet
// opened, before the request reaches the session table; false once it has
// answered the request itself. 2026-07-28 has no sessions.
func (f *operator) adopted(w http.ResponseWriter, r *http.Request) bool {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || f.sessions.fleet == nil {
		return true
	}
	if rev, ok := parseRevision(r.Header.Get("Mcp-Protocol-Version")); ok && rev.atLeast(modernProtocol) {
		return true
	}
	return f.adopt(w, r, id)
}

// serveStateful hands a 2025 request to the SDK's stateful handler, or to
// the session this node took up from the fleet that it names.
func (f *operator) serveStateful(w http.ResponseWriter, r *http.Request) {
	if s := f.sessions.get(r.Header.Get("Mcp-Session-Id")); s != nil && s.serve != nil {
		s.serve.ServeHTTP(w, r)
		return
	}
	f.stateful.ServeHTTP(w, r)
}
