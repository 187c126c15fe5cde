package oauth

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/go-jose/go-jose/v4"
)

// Issue 36 finding 2: a verified token is answered from memory until its
// expiry, while the key that signed it is published and the audience is
// this hub's; a new revision forgets every one; at most MaxTakenTokens
// are kept.
func TestTakenTokens(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	v := New(nil)
	v.now = func() time.Time { return now }
	v.Set(&Config{Issuer: "https://id.example.com"})
	keys := &keySet{keys: []jose.JSONWebKey{{KeyID: "k1"}}}
	res := []string{"https://hub.example.com/operator/mcp"}
	ada := authority.Principal{TokenID: "oidc:u-ada", Seat: "ada"}
	d := sha256.Sum256([]byte("token"))
	v.remember(d, v.revision(), takenToken{principal: ada, aud: res, kid: "k1", until: now.Add(time.Minute)})
	if p, ok := v.cached(d, keys, "", res); !ok || p != ada {
		t.Fatalf("a token verified a moment ago: %+v %v", p, ok)
	}
	if _, ok := v.cached(d, keys, "", []string{"https://other.example.com"}); ok {
		t.Fatal("answered for another resource")
	}
	if _, ok := v.cached(d, &keySet{keys: []jose.JSONWebKey{{KeyID: "k2"}}}, "", res); ok {
		t.Fatal("answered once its key was withdrawn")
	}
	now = now.Add(time.Minute)
	if _, ok := v.cached(d, keys, "", res); ok {
		t.Fatal("answered at its expiry")
	}

	rev := v.revision()
	v.remember(d, rev, takenToken{principal: ada, aud: res, kid: "k1", until: now.Add(time.Minute)})
	v.Set(&Config{Issuer: "https://id.example.com"})
	if _, ok := v.cached(d, keys, "", res); ok {
		t.Fatal("answered under a new revision")
	}
	v.remember(d, rev, takenToken{principal: ada, aud: res, kid: "k1", until: now.Add(time.Minute)})
	if _, ok := v.cached(d, keys, "", res); ok {
		t.Fatal("a token verified under the revision before was remembered into the new one")
	}

	for i := range MaxTakenTokens + 1 {
		v.remember(sha256.Sum256(fmt.Append(nil, i)), v.revision(), takenToken{until: now.Add(time.Minute)})
		if len(v.taken) > MaxTakenTokens {
			t.Fatalf("%d tokens kept, past the cap of %d", len(v.taken), MaxTakenTokens)
		}
	}
}
