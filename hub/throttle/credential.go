package throttle

import (
	"crypto/sha256"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The API's rule slows failures, not callers. A credential is checked
// first, always, and one that verifies is never refused here; only a
// credential that failed is counted, and answered 429 rather than 401
// once it failed too often:
//   - per source and credential: CredentialBurst failures of one
//     credential from one address, then one every CredentialRefill (a
//     client that keeps sending a stale token slows only that token, so a
//     neighbour behind the same address or proxy is never locked out);
//   - per source, whatever the credential: SourceCeiling failures, then
//     one every SourceRefill (a guesser trying one credential after
//     another).
const (
	CredentialBurst  = 10
	CredentialRefill = 2 * time.Second
	SourceCeiling    = 100
	SourceRefill     = time.Second
)

// Credentials keeps the API's failures per (source, credential digest)
// and per source. It is safe for concurrent use and owns no goroutine.
type Credentials struct {
	now func() time.Time

	pairs   *buckets[pair]
	sources *buckets[string]
}

type pair struct {
	source string
	digest [sha256.Size]byte
}

// NewCredentials makes the API's failure counter with the default
// figures, on the clock now (nil: time.Now).
func NewCredentials(now func() time.Time) *Credentials {
	if now == nil {
		now = time.Now
	}
	return &Credentials{now: now,
		pairs:   newBuckets[pair](CredentialBurst, CredentialRefill),
		sources: newBuckets[string](SourceCeiling, SourceRefill)}
}

// Failed counts a credential (by its digest) that failed from source, and
// reports whether the failure is to be answered 429 and after how long the
// next try is counted again: when the credential's own bucket at that
// source, or the source's ceiling, is spent.
func (c *Credentials) Failed(source string, digest [sha256.Size]byte) (time.Duration, bool) {
	now := c.now()
	w1, over1 := c.pairs.take(pair{source, digest}, now)
	w2, over2 := c.sources.take(source, now)
	return max(w1, w2), over1 || over2
}

// buckets are token buckets by key, at most maxSources of them: past that
// the full ones (nothing to remember) are dropped, and if that frees
// nothing, all are.
type buckets[K comparable] struct {
	refill rate.Limit
	burst  int

	mu sync.Mutex
	by map[K]*rate.Limiter
}

func newBuckets[K comparable](burst int, refill time.Duration) *buckets[K] {
	return &buckets[K]{refill: rate.Every(refill), burst: burst, by: map[K]*rate.Limiter{}}
}

// take takes one from key's bucket; when it is empty it takes nothing and
// says how long until it holds one.
func (b *buckets[K]) take(key K, now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.by[key]
	if !ok {
		if len(b.by) >= maxSources {
			for k, l := range b.by {
				if l.TokensAt(now) >= float64(b.burst) {
					delete(b.by, k)
				}
			}
			if len(b.by) >= maxSources {
				clear(b.by)
			}
		}
		l = rate.NewLimiter(b.refill, b.burst)
		b.by[key] = l
	}
	if l.AllowN(now, 1) {
		return 0, false
	}
	return time.Duration((1 - l.TokensAt(now)) / float64(b.refill) * float64(time.Second)), true
}

// RefuseWrong answers a wrong credential past its bucket: 429 with how
// many seconds to wait, in words that say the credential itself is wrong.
func RefuseWrong(w http.ResponseWriter, reason string, wait time.Duration) {
	secs := int(wait/time.Second) + 1
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, "Too Many Requests: "+reason+", and too many wrong credentials came from this address; check the credential, then wait "+
		strconv.Itoa(secs)+" s before the next try. A right credential is never slowed.", http.StatusTooManyRequests)
}
