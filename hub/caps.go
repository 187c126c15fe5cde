package hub

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
)

// The caps per credential of /operator/mcp (api.limits, config/limits.go):
// what one credential may hold of the node at once, so that one person, or
// a script with their token, cannot take the node from everybody else.
// Every count is kept per credential (a session's calls per session), and
// a credential at its cap changes nothing for any other.
//
// What a client past a cap gets, and why:
//   - a request past requests_per_credential (requests in service, of any
//     kind, on any route behind the bearer check: each holds a
//     connection), an initialize past sessions_per_credential, and a GET past
//     streams_per_credential, are answered 429 at once, with Retry-After
//     and a sentence naming the cap, its number and the key that raises
//     it. A session refused its stream works on without it: the go-sdk
//     client (v1.8.0, unless strict) reads a 4xx on that GET as it reads
//     a 405, no stream offered, and keeps the session.
//   - a tool call past calls_per_session or calls_per_credential is
//     answered as a refused call (REF-1), class unavailable, saying the
//     call was not made. Every MCP client hands a tool's failed result to
//     the model or the person as the tool's answer, in the hub's words,
//     and the session goes on; a 429 on the call's POST reaches a go-sdk
//     client (v1.8.0) as "Too Many Requests" alone, the sentence dropped.

// The Retry-After of a 429, in seconds. A session its client left is
// closed after the session grace (a minute by default), which frees its
// slot and its stream's; most requests are answered within seconds.
const (
	sessionRetryAfter = 60
	requestRetryAfter = 5
)

// counts is what each key (a credential, or a session) holds of one kind.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more for key, unless key holds max already.
func (c *counts) take(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return true
}

// give counts one less for key; a key down to none is forgotten, so the
// map holds only keys holding something.
func (c *counts) give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

func (c *counts) held(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// caps holds the operator surface's counts against api.limits.
type caps struct {
	requests, sessions, streams, calls counts // by credential
	sessionCalls                       counts // by session id
	// bound is the credential each open session counts against, by id,
	// so a session's slot is given back when it closes.
	mu    sync.Mutex
	bound map[string]string
}

func (f *operator) limits() config.Limits {
	if c := f.control.Company(); c != nil {
		return c.API.Limits
	}
	return config.Limits{}
}

// capReached logs a credential meeting a cap, sampled as the other
// refusals are (at most one line per cap every 10 s, with a count of
// those left out): an operator sees who is at which cap.
func (f *operator) capReached(key, cred string, max int) {
	f.refusals.note(slog.LevelInfo, "credential_cap_reached", "api.limits."+key, "credential", cred, "cap", max)
}

// refuseCap answers 429 at once with a sentence and Retry-After.
func refuseCap(w http.ResponseWriter, retryAfter int, sentence string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	http.Error(w, "Too Many Requests: "+sentence, http.StatusTooManyRequests)
}

// hold takes one of cred's slots in c under the cap api.limits.key (max),
// or logs the cap met and answers 429: "credential C has MAX " and held,
// what the slots are and what to do.
func (f *operator) hold(w http.ResponseWriter, c *counts, key, cred string, max, retryAfter int, held string) bool {
	if c.take(cred, max) {
		return true
	}
	f.capReached(key, cred, max)
	refuseCap(w, retryAfter, fmt.Sprintf("credential %s has %d %s", cred, max, held))
	return false
}

// servingRequest counts a verified request against its credential while
// it is served, or answers 429.
func (f *operator) servingRequest(w http.ResponseWriter, p authority.Principal) (done func(), ok bool) {
	if !f.hold(w, &f.caps.requests, "requests_per_credential", p.TokenID, f.limits().Requests(), requestRetryAfter,
		"requests in service on this hub, the most one credential may have at once "+
			"(each holds a connection: event streams, calls, reads). Let some finish, end sessions you no longer use, "+
			"or have an administrator raise api.limits.requests_per_credential in the company file.") {
		return nil, false
	}
	return func() { f.caps.requests.give(p.TokenID) }, true
}

// openingSession counts a would-be session (a POST that may open one)
// against its credential, or answers 429; done, called once the POST is
// answered, binds the slot to the session it opened or gives it back.
func (f *operator) openingSession(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	p, known := principalFrom(r.Context())
	if !known {
		return func() {}, true
	}
	if !f.holdSession(w, p) {
		return nil, false
	}
	return func() { f.bindSession(w.Header().Get("Mcp-Session-Id"), p.TokenID) }, true
}

// holdSession takes one of p's session slots, or answers 429. A session
// this node takes up from the fleet's record holds one as a session it
// opened does (mcp_sessions_fleet.go).
func (f *operator) holdSession(w http.ResponseWriter, p authority.Principal) bool {
	return f.hold(w, &f.caps.sessions, "sessions_per_credential", p.TokenID, f.limits().Sessions(), sessionRetryAfter,
		"MCP sessions open, the most one credential may hold at once. "+
			"End sessions you no longer use (a client ends its own with DELETE as it exits), wait for ones left idle to close, "+
			"or have an administrator raise api.limits.sessions_per_credential in the company file.")
}

// bindSession keeps cred's slot with the session id, if the POST opened
// one the hub keeps; otherwise the slot is given back. The session may be
// closed already (its client sent DELETE as soon as it read the answer):
// the slot is bound first and the table asked after, and sessionClosed
// gives a slot back once however the two interleave.
func (f *operator) bindSession(id, cred string) {
	if id == "" {
		f.caps.sessions.give(cred)
		return
	}
	f.caps.mu.Lock()
	if f.caps.bound == nil {
		f.caps.bound = map[string]string{}
	}
	f.caps.bound[id] = cred
	f.caps.mu.Unlock()
	if f.sessions.get(id) == nil {
		f.sessionClosed(id)
	}
}

// sessionClosed gives back the slot a closed session held.
func (f *operator) sessionClosed(id string) {
	f.caps.mu.Lock()
	cred, ok := f.caps.bound[id]
	delete(f.caps.bound, id)
	f.caps.mu.Unlock()
	if ok {
		f.caps.sessions.give(cred)
	}
}

// openingStream counts a session's GET against its credential for as long
// as it is open, or answers 429.
func (f *operator) openingStream(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	p, known := principalFrom(r.Context())
	if !known {
		return func() {}, true
	}
	if !f.hold(w, &f.caps.streams, "streams_per_credential", p.TokenID, f.limits().Streams(), sessionRetryAfter,
		"event streams open (a session's GET), the most one credential may hold at once; "+
			"this session works on without one, but is told of no change to the catalogue until it opens one. "+
			"End sessions you no longer use, or have an administrator raise api.limits.streams_per_credential in the company file.") {
		return nil, false
	}
	return func() { f.caps.streams.give(p.TokenID) }, true
}

// startCall counts a tool call against its credential and, on a 2025
// session (session, "" for none), against the session, for as long as it
// runs; past either cap the call is refused and not made.
func (f *operator) startCall(p authority.Principal, session string) (done func(), refused *authority.Refusal) {
	l := f.limits()
	if session != "" {
		if max := l.SessionCalls(); !f.caps.sessionCalls.take(session, max) {
			f.capReached("calls_per_session", p.TokenID, max)
			return nil, authority.Refuse(authority.Unavailable, "This session has %d tool calls in flight, the most one session may have at once, "+
				"so this call was not made. Call again once one of them has answered, or have an administrator raise api.limits.calls_per_session in the company file.", max)
		}
	}
	if max := l.Calls(); !f.caps.calls.take(p.TokenID, max) {
		f.capReached("calls_per_credential", p.TokenID, max)
		if session != "" {
			f.caps.sessionCalls.give(session)
		}
		return nil, authority.Refuse(authority.Unavailable, "Credential %s has %d tool calls in flight over all its sessions, the most one credential may have at once, "+
			"so this call was not made. Call again once one of them has answered, or have an administrator raise api.limits.calls_per_credential in the company file.", p.TokenID, max)
	}
	return func() {
		f.caps.calls.give(p.TokenID)
		if session != "" {
			f.caps.sessionCalls.give(session)
		}
	}, nil
}
