package hub

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest/idp"
	"github.com/crewlet/hub/hub/oauth"
)

// Issue 36 finding 10: the dates and the type of a token are read as the
// README says. nbf and iat may be at most 30 s ahead of the hub's clock
// (go-oidc allowed nbf 4.5 minutes ahead and ignored iat); the JOSE typ is
// an access token's (at+jwt, application/at+jwt, or the plain JWT or none
// most providers write), and any other type its key signed is refused.
// The tokens are signed with the provider's own key.
func TestOAuthTokenDatesAndType(t *testing.T) {
	r := newOAuthRig(t)
	now := time.Now()
	claims := func(change map[string]any) map[string]any {
		c := map[string]any{"sub": idp.ServiceClientID, "aud": []string{r.url + "/operator/mcp"}, "scope": "crewlet",
			"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
		for k, v := range change {
			c[k] = v
		}
		return c
	}
	for _, tc := range []struct {
		name, typ string
		change    map[string]any
		says      string // empty: taken
	}{
		{"at+jwt", "at+jwt", nil, ""},
		{"application/at+jwt", "application/at+jwt", nil, ""},
		{"JWT", "JWT", nil, ""},
		{"no typ", "", nil, ""},
		{"logout token", "logout+jwt", nil, `the token's type is "logout+jwt", not an access token's`},
		{"DPoP proof", "dpop+jwt", nil, `the token's type is "dpop+jwt", not an access token's`},
		{"nbf within the skew", "at+jwt", map[string]any{"nbf": now.Add(20 * time.Second).Unix()}, ""},
		{"nbf four minutes ahead", "at+jwt", map[string]any{"nbf": now.Add(4 * time.Minute).Unix()}, "the token is not valid before"},
		{"iat within the skew", "at+jwt", map[string]any{"iat": now.Add(20 * time.Second).Unix()}, ""},
		{"iat a year ahead", "at+jwt", map[string]any{"iat": now.Add(365 * 24 * time.Hour).Unix()}, "in the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := r.idp.Forge(t, tc.typ, claims(tc.change))
			status, _, body := r.get(t, http.MethodGet, "/tools", tok)
			switch {
			case tc.says == "" && status != http.StatusOK:
				t.Fatalf("refused: %d %s", status, body)
			case tc.says != "" && (status != http.StatusUnauthorized || !strings.Contains(body, tc.says)):
				t.Fatalf("%d %s, want 401 saying %q", status, body, tc.says)
			}
		})
	}
}

// Issue 36 finding 10: e-mails are compared by ASCII case alone. The
// provider verified "\u212aate@example.com" (a Kelvin sign, not a K),
// which strings.ToLower folds to kate@example.com: that person is not
// Kate. Kate's own address in other ASCII case is still hers.
func TestOAuthEmailFoldsASCIIOnly(t *testing.T) {
	r := newOAuthRigOf(t, []idp.User{
		{Subject: "u-kelvin", Username: "kelvin", Password: "kelvin-pw", Email: "\u212aate@example.com"},
		{Subject: "u-kate", Username: "kate", Password: "kate-pw", Email: "Kate@Example.COM"},
	}, []string{`{name: Kate, handle: kate, kind: human, admin: true, email: kate@example.com}`})
	ctx := context.Background()
	kelvin, err := r.idp.UserToken(ctx, "kelvin", "kelvin-pw", "openid", "email", "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", kelvin); status != http.StatusForbidden || !strings.Contains(body, `subject "u-kelvin" names no person's seat`) {
		t.Fatalf("a token whose e-mail is K-elvin-ate: %d %s", status, body)
	}
	kate, err := r.idp.UserToken(ctx, "kate", "kate-pw", "openid", "email", "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", kate); status != http.StatusOK {
		t.Fatalf("Kate's token, her e-mail in other case: %d %s", status, body)
	}
}

// Issue 36 finding 2: the provider's key set is read again for a token
// naming a key the hub does not hold, a bounded number of times per
// issuer, not once per token: 20 tokens with a bad signature under the
// key the hub holds cause no read, and 20 naming unknown keys, from 20
// addresses, at most oauth.KeyFetchBurst (and one more per
// oauth.KeyFetchEvery the run took).
func TestOAuthKeyFetchesBoundedPerIssuer(t *testing.T) {
	r := newOAuthRig(t)
	good, err := r.idp.ServiceToken(context.Background(), "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", good); status != http.StatusOK {
		t.Fatalf("the good token: %d %s", status, body)
	}
	start, before := time.Now(), r.idp.KeyFetches()
	parts := strings.Split(good, ".")
	from := func(i int) net.IP { return net.IPv4(127, 0, 1, byte(i+1)) }
	for i := range 20 {
		sig := []byte(parts[2])
		sig[i%len(sig)] ^= 0x01
		if status, _, body := sendFrom(t, from(i), r.url, "/tools", parts[0]+"."+parts[1]+"."+string(sig)); status != http.StatusUnauthorized {
			t.Fatalf("a bad signature: %d %s", status, body)
		}
	}
	if n := r.idp.KeyFetches() - before; n != 0 {
		t.Fatalf("20 bad signatures under a key the hub holds read the key set %d times, want none", n)
	}
	for i := range 20 {
		head := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":"RS256","kid":"gone-%d","typ":"JWT"}`, i))
		if status, _, body := sendFrom(t, from(i), r.url, "/tools", head+"."+parts[1]+"."+parts[2]); status != http.StatusUnauthorized {
			t.Fatalf("an unknown key: %d %s", status, body)
		}
	}
	limit := int64(oauth.KeyFetchBurst) + int64(time.Since(start)/oauth.KeyFetchEvery)
	if n := r.idp.KeyFetches() - before; n > limit {
		t.Fatalf("20 tokens naming unknown keys read the key set %d times, want at most %d", n, limit)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", good); status != http.StatusOK {
		t.Fatalf("the good token after them: %d %s", status, body)
	}
}
