package screen

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// A sign-in is a session kept by the hub, not a token kept by the
// browser: the cookie holds a random session id, and the hub keeps, under
// the id's digest, which credential opened it and that credential's
// digest. Sign-out deletes it, so the cookie is worth nothing after; a
// credential revoked or replaced ends it at its next request; a session
// lives sessionTTL from its sign-in at most. The hub gives the screen a
// store kept in its data directory and shared by every node of a fleet
// (Options.Sessions), so a sign-in holds on any node and across a
// restart.

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 12 * time.Hour

// Sessions is where sign-ins are kept, by key, each until its TTL passes.
type Sessions interface {
	Put(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Get answers ErrNoSession for a key not held (never, expired or
	// deleted).
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete forgets a key; a key not held is no error.
	Delete(ctx context.Context, key string) error
}

// ErrNoSession marks a session id no store holds.
var ErrNoSession = errors.New("screen: no such session")

// sessionRecord is what a store keeps of one sign-in: never the token.
type sessionRecord struct {
	TokenID string `json:"token_id"`
	// Digest is the token's digest, so a credential replaced under the
	// same id ends the session.
	Digest  string    `json:"digest"`
	Created time.Time `json:"created"`
}

// newSessionID draws a session id: 32 random bytes, as a cookie value.
func newSessionID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sessionKey is where a session id's record is kept: its digest, so what
// a store holds (on disk, on every node of a fleet) opens no session.
func sessionKey(id string) string {
	d := sha256.Sum256([]byte("crewlet screen session\x00" + id))
	return hex.EncodeToString(d[:])
}

func encodeRecord(r sessionRecord) []byte {
	b, _ := json.Marshal(r)
	return b
}

func decodeRecord(b []byte) (sessionRecord, bool) {
	var r sessionRecord
	if json.Unmarshal(b, &r) != nil || r.TokenID == "" {
		return sessionRecord{}, false
	}
	return r, true
}

// memorySessions keeps sign-ins in this process, for a hub that runs
// without a data directory (as tests build one): they end with it.
type memorySessions struct {
	mu sync.Mutex
	by map[string]memorySession
}

type memorySession struct {
	value   []byte
	expires time.Time
}

func newMemorySessions() *memorySessions { return &memorySessions{by: map[string]memorySession{}} }

func (m *memorySessions) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, s := range m.by {
		if now.After(s.expires) {
			delete(m.by, k)
		}
	}
	m.by[key] = memorySession{value: value, expires: now.Add(ttl)}
	return nil
}

func (m *memorySessions) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.by[key]
	if !ok || time.Now().After(s.expires) {
		return nil, ErrNoSession
	}
	return s.value, nil
}

func (m *memorySessions) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.by, key)
	return nil
}
