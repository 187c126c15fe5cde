package authority

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
)

// TokenEntry is an operator credential as configuration declares it. Secret
// is the plaintext; the store keeps only its digest.
type TokenEntry struct {
	ID     string
	Secret string
	// Seat binds the token to a person's seat: calls made with it write as
	// that seat, kind human. Empty: the token writes as token:<ID>, kind
	// operator.
	Seat  string
	Admin bool
}

// Principal is what a verified credential stands for. It carries no secret.
type Principal struct {
	TokenID string
	Seat    string
	Admin   bool
}

// Caller is the identity an operator-surface call acts as (OPS-4): a bound
// token writes as its seat with kind human, an unbound one as token:<id> with
// kind operator, and the credential is always kept as operator_id.
func (p Principal) Caller() Caller {
	c := Caller{Seat: p.Seat, Kind: KindHuman, OperatorID: p.TokenID, Admin: p.Admin}
	if p.Seat == "" {
		c.Seat, c.Kind = TokenLoginPrefix+p.TokenID, KindOperator
	}
	c.Requester = c.Seat
	return c
}

type storedToken struct {
	digest [sha256.Size]byte
	p      Principal
}

// Tokens verifies operator bearer tokens. Only SHA-256 digests are held, so a
// memory dump or a debug print of the store shows no usable credential. It is
// safe for concurrent use; Replace swaps the whole set atomically, which is
// how a reloaded configuration revokes a token between two calls of one
// client session.
type Tokens struct {
	mu     sync.RWMutex
	tokens []storedToken
}

// NewTokens returns a store holding entries.
func NewTokens(entries ...TokenEntry) *Tokens {
	t := &Tokens{}
	t.Replace(entries)
	return t
}

// Replace swaps the set of valid tokens.
func (t *Tokens) Replace(entries []TokenEntry) {
	next := make([]storedToken, 0, len(entries))
	for _, e := range entries {
		next = append(next, storedToken{
			digest: sha256.Sum256([]byte(e.Secret)),
			p:      Principal{TokenID: e.ID, Seat: e.Seat, Admin: e.Admin},
		})
	}
	t.mu.Lock()
	t.tokens = next
	t.mu.Unlock()
}

// Revoke withdraws the token with this id; it reports whether one was held.
func (t *Tokens) Revoke(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.tokens {
		if s.p.TokenID == id {
			t.tokens = append(t.tokens[:i:i], t.tokens[i+1:]...)
			return true
		}
	}
	return false
}

// Verify returns the principal a presented secret stands for. Every stored
// digest is compared in constant time, so the answer's timing says nothing
// about which token came close.
func (t *Tokens) Verify(secret string) (Principal, bool) {
	if secret == "" {
		return Principal{}, false
	}
	d := Digest(secret)
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found Principal
	ok := false
	for _, s := range t.tokens {
		if subtle.ConstantTimeCompare(d[:], s.digest[:]) == 1 {
			found, ok = s.p, true
		}
	}
	return found, ok
}

// Digest is what a session keeps of the token it was opened with: the
// digest the store compares, never the token.
func Digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// Current returns the principal of the token with this id, if it is still
// held with this digest: a session opened with a token ends when the token
// is revoked or replaced, though the session never kept the token.
func (t *Tokens) Current(id string, digest [sha256.Size]byte) (Principal, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, s := range t.tokens {
		if s.p.TokenID == id && subtle.ConstantTimeCompare(digest[:], s.digest[:]) == 1 {
			return s.p, true
		}
	}
	return Principal{}, false
}

// Len is the number of valid tokens.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.tokens)
}
