package authority

import "strings"

// Kind says what sort of principal stands behind a call.
type Kind string

const (
	// KindAgent is an agent seat acting inside one of its turns.
	KindAgent Kind = "agent"
	// KindHuman is a person: their own seat, or a credential bound to it.
	KindHuman Kind = "human"
	// KindOperator is a credential nobody is bound through; it acts under its
	// own login, token:<id>.
	KindOperator Kind = "operator"
)

// Caller is who a tool call is made by and for. The hub builds it from the
// credential on the request (operator surface) or from the turn (agent
// runtime) and hands it to first-party servers in the request metadata; a
// server never takes it from the caller's own arguments.
type Caller struct {
	// Seat is the identity the call writes as: a seat handle, or token:<id>
	// for an unbound operator credential.
	Seat string `json:"seat"`
	Kind Kind   `json:"kind"`
	// Requester is whom the call acts for (the requester ceiling): the person
	// who woke the turn, or the caller itself on the operator surface.
	Requester string `json:"requester,omitempty"`
	// TurnKey identifies the turn a seat's call belongs to; a re-run turn
	// carries the same key so its writes land once.
	TurnKey string `json:"turn_key,omitempty"`
	// Operation is the name an operator-surface caller gave the operation
	// its call is (the Idempotency-Key of /operator/act). Under the same
	// credential, the same name brought back with the same call is the
	// same operation and lands once; brought back with another call it is
	// refused. A seat never carries one: its turn is its operations'
	// identity.
	Operation string `json:"operation,omitempty"`
	// OperatorID is the credential behind an operator-surface call. It is
	// recorded beside every write whatever seat the write is attributed to.
	OperatorID string `json:"operator_id,omitempty"`
	// Admin says the credential behind an operator-surface call is an
	// administrator's. A seat's own administrator flag lives in the
	// directory; this carries the one an unbound credential has, which no
	// seat can vouch for (see IsAdmin).
	Admin bool `json:"admin,omitempty"`
}

// IsAdmin reports whether the caller may do what the company gives its
// administrators: an administrator's credential, or a person whose seat the
// directory marks admin. An agent seat is never one, whatever a credential
// says: administration is a person's.
func IsAdmin(c Caller, d *Directory) bool {
	if c.Kind == KindAgent {
		return false
	}
	if c.Admin {
		return true
	}
	if d == nil || c.Kind != KindHuman {
		return false
	}
	s, ok := d.Seat(c.Seat)
	return ok && s.Admin
}

// Valid reports whether the caller names an identity at all; a first-party
// server refuses a call whose caller does not.
func (c Caller) Valid() bool {
	switch c.Kind {
	case KindAgent, KindHuman, KindOperator:
	default:
		return false
	}
	if strings.TrimSpace(c.Seat) == "" {
		return false
	}
	// An operator credential's login is always token:<id>; a seat's never is.
	return (c.Kind == KindOperator) == strings.HasPrefix(c.Seat, TokenLoginPrefix)
}

// TokenLoginPrefix starts the login an unbound credential writes under.
const TokenLoginPrefix = "token:"
