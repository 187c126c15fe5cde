package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest/idp"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/hub/secrets"
)

// Issue 36 finding 4 (OUT-1): a seat's grant tokens are redacted wherever
// a ${VAR} value is. A server of auth: oauth whose tool says the bearer
// it was sent shows the seat [REDACTED], before and after the token is
// renewed; the hub's sanitiser, which its log handler reads too, redacts
// the access tokens, old and new, and the refresh tokens. The provider's
// tokens are opaque to their holder (encrypted, five parts), which no
// credential shape covers whole.
func TestSeatGrantTokensRedacted(t *testing.T) {
	prov := idp.Start(t, "crewlet-upstream", idp.User{Subject: "u-alice-gh", Username: "alice-gh", Password: "pw-alice", Email: "alice@example.com"})
	prov.OpaqueTokens()
	serverURL := prov.ProtectedServer(t, grantClientID)
	h, web, ev := grantHub(t, serverURL)
	prov.AddWebClient(grantClientID, grantClientSecret, web.URL+"/settings/mcp-tools/oauth/callback")
	ev.await(t, 10*time.Second, "mcp_server_awaiting_credential", "server=gh", "seat=alice")

	// Tokens live 3 s: the grant's token is renewed ahead of that.
	prov.SetLifetime(3 * time.Second)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp := signInAtProvider(t, c, authorizeLink(t, c, web.URL, "alice"), prov.Issuer, "alice-gh", "pw-alice")
	resp.Body.Close()
	ev.await(t, 10*time.Second, "oauth_grant_received", "server=gh", "seat=alice")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	h.servers.awaitSeatStarted(ctx, "alice")

	echoed := func(when string) string {
		t.Helper()
		tok := h.servers.grants.AccessToken("gh", "alice")
		if tok == "" || strings.Count(tok, ".") == 2 {
			t.Fatalf("%s: alice holds the token %q; want an opaque one", when, tok)
		}
		res := seatCall(t, h, "alice", "echo_bearer")
		if got := textOf(res); res.IsError || got != "your token is "+sanitize.Redacted {
			t.Fatalf("%s: the seat read %q (error %v); want the token redacted", when, got, res.IsError)
		}
		return tok
	}
	first := echoed("after the grant")
	// The renewal's line is written once the new token is held.
	ev.await(t, 10*time.Second, "oauth_token_refreshed", "server=gh", "seat=alice")
	second := echoed("after a renewal")
	if second == first {
		t.Fatal("the renewal left alice's token as it was")
	}
	for _, tok := range append([]string{first, second}, refreshTokens(t, h)...) {
		if got := h.clean.RedactSecrets("grant " + tok); got != "grant "+sanitize.Redacted {
			t.Fatalf("the hub's log would read %q", got)
		}
	}
}

// refreshTokens reads the refresh tokens sealed in the hub's grant store.
func refreshTokens(t *testing.T, h *Hub) []string {
	t.Helper()
	store := h.opts.Grants.(*secrets.Store)
	var out []string
	for _, name := range store.Names() {
		raw, _ := store.Lookup(name)
		var rec struct {
			Refresh string `json:"refresh_token"`
		}
		if json.Unmarshal([]byte(raw), &rec) == nil && rec.Refresh != "" {
			out = append(out, rec.Refresh)
		}
	}
	if len(out) == 0 {
		t.Fatal("the grant store holds no refresh token")
	}
	return out
}
