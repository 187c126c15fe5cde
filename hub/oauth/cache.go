package oauth

import (
	"crypto/sha256"
	"time"

	"github.com/crewlet/hub/authority"
)

// MaxTakenTokens bounds how many verified tokens the hub remembers, so
// that a token sent with every request is verified once, not each time.
// Past it, the expired are dropped, and if that frees nothing, all are: a
// company has far fewer live tokens, and a flood of them costs only their
// verification again.
const MaxTakenTokens = 4096

// takenToken is a token that verified: who it acts as, until its expiry
// (and the clock skew), while the key that signed it is still published.
type takenToken struct {
	principal authority.Principal
	aud       []string
	kid       string
	until     time.Time
}

// cached answers the principal of a token verified before, if it still
// holds: not expired, its key still published, issued for this hub.
func (v *Verifier) cached(digest [sha256.Size]byte, keys *keySet, audience string, resources []string) (authority.Principal, bool) {
	v.mu.Lock()
	t, ok := v.taken[digest]
	if ok && !v.now().Before(t.until) {
		delete(v.taken, digest)
		ok = false
	}
	v.mu.Unlock()
	if !ok || !keys.published(t.kid) || !audienceFits(t.aud, audience, resources) {
		return authority.Principal{}, false
	}
	return t.principal, true
}

func (v *Verifier) revision() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rev
}

// remember keeps a verified token until it expires, unless the revision
// it was verified under has been replaced since.
func (v *Verifier) remember(digest [sha256.Size]byte, rev int, t takenToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if rev != v.rev {
		return
	}
	if v.taken == nil {
		v.taken = map[[sha256.Size]byte]takenToken{}
	}
	if len(v.taken) >= MaxTakenTokens {
		now := v.now()
		for d, old := range v.taken {
			if !now.Before(old.until) {
				delete(v.taken, d)
			}
		}
		if len(v.taken) >= MaxTakenTokens {
			clear(v.taken)
		}
	}
	v.taken[digest] = t
}
