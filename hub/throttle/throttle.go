// Package throttle slows wrong credentials down.
//
// Credentials (credential.go) is the operator API's rule: a credential is
// always checked, one that verifies is never refused, and only failures
// are counted, per source address and credential digest with a ceiling
// per source, so a client that keeps sending a stale token slows only that
// token, never a neighbour behind the same address.
//
// Throttle is the screen's sign-in: each source has a bucket of wrong
// tries that refills at a steady rate, and a source whose bucket is empty
// is answered "too many requests" before its token is read, until the
// bucket refills. A right token takes nothing from the bucket, and a
// source that guesses slows only itself.
//
// Both are safe for concurrent use and own no goroutine.
package throttle

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxSources bounds how many sources a Throttle remembers. Past it, the
// sources whose buckets are full again (nothing to remember) are dropped,
// and if that frees nothing, every source is: a flood from that many
// addresses resets the slowdown rather than the hub's memory.
const maxSources = 10000

// The default bucket: ten wrong tries at once, then one every two
// seconds. A person who mistypes a token a few times is never slowed; a
// guesser makes 1,800 tries an hour instead of thousands a second.
const (
	DefaultBurst  = 10
	DefaultRefill = 2 * time.Second
)

// Default makes a Throttle with the default bucket.
func Default() *Throttle { return New(DefaultBurst, DefaultRefill) }

// Throttle keeps each source's bucket of wrong tries.
type Throttle struct {
	refill rate.Limit
	burst  int
	now    func() time.Time

	mu sync.Mutex
	by map[string]*rate.Limiter
}

// New makes a Throttle that lets each source make burst wrong tries at
// once, and one more every refill.
func New(burst int, refill time.Duration) *Throttle {
	return &Throttle{refill: rate.Every(refill), burst: burst, now: time.Now, by: map[string]*rate.Limiter{}}
}

// Blocked reports whether a source has no wrong try left, and how long
// until it has one.
func (t *Throttle) Blocked(source string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.by[source]
	if !ok {
		return 0, false
	}
	tokens := l.TokensAt(t.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / float64(t.refill) * float64(time.Second)), true
}

// Failed takes a wrong try from a source's bucket.
func (t *Throttle) Failed(source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	l, ok := t.by[source]
	if !ok {
		if len(t.by) >= maxSources {
			t.forget(now)
		}
		l = rate.NewLimiter(t.refill, t.burst)
		t.by[source] = l
	}
	l.AllowN(now, 1)
}

// forget drops the sources with nothing to remember; all of them if that
// frees nothing.
func (t *Throttle) forget(now time.Time) {
	for s, l := range t.by {
		if l.TokensAt(now) >= float64(t.burst) {
			delete(t.by, s)
		}
	}
	if len(t.by) >= maxSources {
		clear(t.by)
	}
}

// Source is the address a request comes from, as the connection says:
// never a header a client writes, which would let a guesser pick a fresh
// source for each try.
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
