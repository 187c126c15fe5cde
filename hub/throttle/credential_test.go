package throttle

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

// Issue 36 finding 2: failures are counted per source and credential: a
// stale credential spends its own bucket, and another credential from the
// same source is not refused for it; a source that tries one credential
// after another meets its ceiling; time refills both.
func TestCredentialFailuresPerSourceAndDigest(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	cr := NewCredentials(c.now)
	stale, other := sha256.Sum256([]byte("stale")), sha256.Sum256([]byte("other"))
	for i := range CredentialBurst {
		if _, over := cr.Failed("10.0.0.1", stale); over {
			t.Fatalf("the stale credential refused at failure %d", i+1)
		}
	}
	wait, over := cr.Failed("10.0.0.1", stale)
	if !over || wait != CredentialRefill {
		t.Fatalf("past its bucket the stale credential: over %v, wait %s", over, wait)
	}
	if _, over := cr.Failed("10.0.0.1", other); over {
		t.Fatal("another credential from the same source was refused for the stale one's failures")
	}
	c.t = c.t.Add(CredentialRefill)
	if _, over := cr.Failed("10.0.0.1", stale); over {
		t.Fatal("the stale credential still refused once its bucket refilled")
	}

	// The ceiling: one source, every credential new.
	for i := range SourceCeiling {
		if _, over := cr.Failed("10.0.0.2", sha256.Sum256(fmt.Append(nil, i))); over {
			t.Fatalf("guess %d refused below the ceiling", i+1)
		}
	}
	wait, over = cr.Failed("10.0.0.2", sha256.Sum256([]byte("one more")))
	if !over || wait != SourceRefill {
		t.Fatalf("past the ceiling: over %v, wait %s", over, wait)
	}
	if _, over := cr.Failed("10.0.0.3", sha256.Sum256([]byte("one more"))); over {
		t.Fatal("another source was refused for the guesser's ceiling")
	}
}
