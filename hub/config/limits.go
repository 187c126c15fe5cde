package config

// Limits caps what one operator credential may hold of a node at once, so
// one person (or one runaway script with their token) cannot take the node
// from everybody else. Each cap counts per credential (a company token, or
// one person of the identity provider), never across credentials: a
// credential at its cap leaves every other one served as before.
//
//	api:
//	  limits:
//	    requests_per_credential: 192
//	    sessions_per_credential: 256
//	    streams_per_credential: 64
//	    calls_per_credential: 64
//	    calls_per_session: 16
//
// A key left out takes its default (below); a key given must be at least 1.
type Limits struct {
	// RequestsPerCredential caps a credential's requests in service on
	// the operator surface at once, of every kind (calls, streams, lists,
	// reads, REST routes, a body still being sent): each holds a
	// connection while it is served, so this is the credential's share
	// of the connection cap. Past it a request is answered 429.
	RequestsPerCredential *int `yaml:"requests_per_credential"`
	// SessionsPerCredential caps the 2025 MCP sessions a credential has
	// open. Past it an initialize is answered 429.
	SessionsPerCredential *int `yaml:"sessions_per_credential"`
	// StreamsPerCredential caps the event streams (a session's GET) a
	// credential has open; each holds a connection for as long as it is
	// open. Past it a GET is answered 429, and the session works on
	// without its stream.
	StreamsPerCredential *int `yaml:"streams_per_credential"`
	// CallsPerCredential caps a credential's tool calls in flight, over
	// all its sessions and its 2026-07-28 requests (which have no
	// session). Past it a call is refused unavailable, not made.
	CallsPerCredential *int `yaml:"calls_per_credential"`
	// CallsPerSession caps one 2025 session's tool calls in flight. Past
	// it a call is refused unavailable, not made.
	CallsPerSession *int `yaml:"calls_per_session"`
}

// The defaults, sized so that one credential holds a minority share of a
// node at the smallest connection cap the hub takes by default (512, where
// the open-file limit cannot be read; on a Linux host it is three quarters
// of a hard limit rarely under 4096, so 3,072 or more): every request it
// has in service holds a connection, and those are at most 192 — three
// eighths of 512, 6 % of 3,072 — of which event streams 64 and calls 64.
// A person's clients open far fewer (an editor, a desktop assistant, a
// CLI and a few agents hold a session, a stream and a handful of calls
// each). docs/limits.md has the argument at length.
const (
	// DefaultRequestsPerCredential: its streams and calls at their caps,
	// and 64 more for everything else (lists, reads, the REST routes).
	DefaultRequestsPerCredential = 192
	// DefaultSessionsPerCredential: a session with its state costs memory,
	// not a connection; 256 of them is at most ~10 MiB at the hub's 40 KiB
	// an idle session, and leaves room for clients that exit without
	// ending their sessions (each is kept a minute's grace).
	DefaultSessionsPerCredential = 256
	// DefaultStreamsPerCredential: each open stream holds a connection for
	// the session's life.
	DefaultStreamsPerCredential = 64
	// DefaultCallsPerCredential: each call in flight holds a connection
	// (its POST) and a call to a server.
	DefaultCallsPerCredential = 64
	// DefaultCallsPerSession: an agent asks for a few tools at once; 16
	// leaves one session room for that and still lets four sessions of a
	// credential run at once before its own cap is met.
	DefaultCallsPerSession = 16
)

// maxLimit bounds a cap as written: past it a number is more likely a slip
// than a cap.
const maxLimit = 1 << 24

func capOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

// Requests is the requests_per_credential cap in force.
func (l Limits) Requests() int { return capOr(l.RequestsPerCredential, DefaultRequestsPerCredential) }

// Sessions is the sessions_per_credential cap in force.
func (l Limits) Sessions() int { return capOr(l.SessionsPerCredential, DefaultSessionsPerCredential) }

// Streams is the streams_per_credential cap in force.
func (l Limits) Streams() int { return capOr(l.StreamsPerCredential, DefaultStreamsPerCredential) }

// Calls is the calls_per_credential cap in force.
func (l Limits) Calls() int { return capOr(l.CallsPerCredential, DefaultCallsPerCredential) }

// SessionCalls is the calls_per_session cap in force.
func (l Limits) SessionCalls() int { return capOr(l.CallsPerSession, DefaultCallsPerSession) }

func (c *Company) checkLimits(add func(string, ...any)) {
	l := c.API.Limits
	for _, k := range []struct {
		key string
		v   *int
	}{
		{"requests_per_credential", l.RequestsPerCredential},
		{"sessions_per_credential", l.SessionsPerCredential},
		{"streams_per_credential", l.StreamsPerCredential},
		{"calls_per_credential", l.CallsPerCredential},
		{"calls_per_session", l.CallsPerSession},
	} {
		switch {
		case k.v == nil:
		case *k.v < 1:
			add("api.limits.%s: %d would refuse every credential; a cap is at least 1 (leave the key out for the default)", k.key, *k.v)
		case *k.v > maxLimit:
			add("api.limits.%s: %d is past the largest cap the hub takes (%d)", k.key, *k.v, maxLimit)
		}
	}
	if s, c := l.SessionCalls(), l.Calls(); s > c && s <= maxLimit && c >= 1 {
		add("api.limits.calls_per_session: %d is more than calls_per_credential (%d), so a session would always meet its credential's cap first; lower it or raise calls_per_credential", s, c)
	}
}
