package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/hubtest/idp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// oauthRig is a hub whose company names a real identity provider started
// by the test (zitadel's OpenID provider on loopback), the people who sign
// in there, and the static administrator's token beside them.
type oauthRig struct {
	idp *idp.Provider
	url string
}

const oauthAdminToken = "admin-token-123456"

var oauthUsers = []idp.User{
	{Subject: "u-ada", Username: "ada", Password: "ada-pw", Email: "ada@example.com"},
	{Subject: "u-bea", Username: "bea", Password: "bea-pw", Email: "bea@example.com"},
	// carl is known to the provider and to no seat of the company.
	{Subject: "u-carl", Username: "carl", Password: "carl-pw", Email: "carl@example.com"},
	// eve claims bea's e-mail, which the provider never verified.
	{Subject: "u-eve", Username: "eve", Password: "eve-pw", Email: "bea@example.com", Unverified: true},
}

func newOAuthRig(t *testing.T, publicURL ...string) *oauthRig {
	t.Helper()
	return newOAuthRigOf(t, oauthUsers, []string{
		`{name: Ada, handle: ada, kind: human, admin: true, oidc_subject: u-ada}`,
		`{name: Bea, handle: bea, kind: human, email: bea@example.com}`,
		// The provider's service client acts for a person's seat too.
		fmt.Sprintf(`{name: Ops, handle: ops, kind: human, oidc_subject: %s}`, idp.ServiceClientID),
	}, publicURL...)
}

// newOAuthRigOf is the rig with the provider's users and the company's
// roles given.
func newOAuthRigOf(t *testing.T, users []idp.User, roles []string, publicURL ...string) *oauthRig {
	t.Helper()
	p := idp.Start(t, "", users...)
	co := hubtest.NewCompany()
	for _, r := range roles {
		co.Role(r)
	}
	c := co.AdminToken("ci", "CI_TOKEN").PublicURL(publicURL...).
		OAuth(fmt.Sprintf(`{issuer: %q, required_scopes: [crewlet]}`, p.Issuer)).Parse(t)
	// The hub is told the address it listens on once it is bound, as
	// serve tells it.
	var listen atomic.Pointer[string]
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{kitServer()},
		Env: hubtest.NewEnv(map[string]string{"CI_TOKEN": oauthAdminToken}).Lookup,
		ListenURL: func() string {
			if u := listen.Load(); u != nil {
				return *u
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	url := hubtest.Serve(t, h.Handler())
	listen.Store(&url)
	// The provider is set up, as a company's would be, to issue tokens
	// for the hub's catalogue (RFC 8707).
	p.SetAudience(url + "/operator/mcp")
	return &oauthRig{idp: p, url: url}
}

// get sends a request with a bearer and answers the status, the challenge
// and the body.
func (r *oauthRig) get(t *testing.T, method, path, token string) (int, []oauthex.Challenge, string) {
	t.Helper()
	req, _ := http.NewRequest(method, r.url+path, strings.NewReader(`{}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("%s %s: the challenge %q does not parse: %v", method, path, resp.Header.Values("WWW-Authenticate"), err)
	}
	return resp.StatusCode, cs, string(body)
}

func bearerParams(t *testing.T, cs []oauthex.Challenge) map[string]string {
	t.Helper()
	for _, c := range cs {
		if c.Scheme == "bearer" {
			return c.Params
		}
	}
	t.Fatalf("no Bearer challenge in %+v", cs)
	return nil
}

// Issue 26, MCP authorization: the hub describes itself as a protected
// resource (RFC 9728) at the root and under /operator/mcp, and a request
// without a credential is answered 401 with a challenge naming the
// document for what it reached; one with a refused token says
// invalid_token. The documents pass the go-sdk client's own checks.
func TestOAuthMetadataAndChallenge(t *testing.T) {
	r := newOAuthRig(t)
	ctx := context.Background()
	for resource, metaURL := range map[string]string{
		r.url + "/operator/mcp": r.url + "/.well-known/oauth-protected-resource/operator/mcp",
		r.url:                   r.url + "/.well-known/oauth-protected-resource",
	} {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, metaURL, resource, http.DefaultClient)
		if err != nil {
			t.Fatalf("%s: %v", metaURL, err)
		}
		if len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != r.idp.Issuer ||
			strings.Join(prm.ScopesSupported, " ") != "crewlet" || strings.Join(prm.BearerMethodsSupported, " ") != "header" {
			t.Errorf("%s: %+v", metaURL, prm)
		}
	}

	status, cs, body := r.get(t, http.MethodPost, "/operator/mcp", "")
	p := bearerParams(t, cs)
	if status != http.StatusUnauthorized || p["resource_metadata"] != r.url+"/.well-known/oauth-protected-resource/operator/mcp" ||
		p["scope"] != "crewlet" || p["error"] != "" || !strings.Contains(body, "no bearer token") {
		t.Fatalf("no credential on /operator/mcp: %d %+v %q", status, p, body)
	}
	status, cs, body = r.get(t, http.MethodGet, "/tools", "not-a-token")
	p = bearerParams(t, cs)
	if status != http.StatusUnauthorized || p["resource_metadata"] != r.url+"/.well-known/oauth-protected-resource" ||
		p["error"] != "invalid_token" || p["error_description"] == "" || !strings.HasPrefix(body, "Unauthorized: the token is not one") {
		t.Fatalf("a refused token on /tools: %d %+v %q", status, p, body)
	}
}

// Issue 26, OPS-4: an IDE assistant signs in the way the MCP authorization
// spec has it, driven by the go-sdk client alone: its first request is
// refused with the challenge, it reads the metadata, finds the provider,
// signs the person in by the authorization code grant with PKCE, and calls
// a tool through /operator/mcp as the person's seat, the credential
// recorded as oidc:<subject>. A service's token by the client credentials
// grant, and a person's mapped by verified e-mail, are taken too, on
// /operator/mcp and /operator/act alike; the static token still is.
func TestOAuthTokensActAsTheirSeat(t *testing.T) {
	r := newOAuthRig(t)
	ctx := context.Background()

	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: idp.IDEClientID},
		RedirectURL:              idp.RedirectURL,
		AuthorizationCodeFetcher: r.idp.SignIn("ada", "ada-pw"),
		// The provider is an OpenID provider, which wants openid asked.
		ScopeFilter: func(s []string) []string { return append(s, "openid") },
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: r.url + "/operator/mcp", OAuthHandler: h}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("the go-sdk client did not sign in through the hub's metadata: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if _, out := callEcho(t, cs, map[string]any{"text": "hi"}); out != (echoOut{Text: "hi", Seat: "ada", Kind: "human", Op: "oidc:u-ada", Admin: true}) {
		t.Fatalf("a call with ada's token acted as %+v", out)
	}

	svc, err := r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	bea, err := r.idp.UserToken(ctx, "bea", "bea-pw", "openid", "email", "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]echoOut{
		svc:             {Text: "x", Seat: "ops", Kind: "human", Op: "oidc:" + idp.ServiceClientID},
		bea:             {Text: "x", Seat: "bea", Kind: "human", Op: "oidc:u-bea"},
		oauthAdminToken: {Text: "x", Seat: "token:ci", Kind: "operator", Op: "ci", Admin: true},
	} {
		if _, out := callEcho(t, hubtest.Connect(t, r.url+"/operator/mcp", token, ""), map[string]any{"text": "x"}); out != want {
			t.Errorf("on /operator/mcp the call acted as %+v, want %+v", out, want)
		}
		status, res := act(t, r.url, token, "k-"+want.Op, actCall("echo", map[string]any{"text": "x"}))
		if sc, _ := structured(t, res); status != http.StatusOK || sc["seat"] != want.Seat || sc["operator_id"] != want.Op {
			t.Errorf("on /operator/act the call answered %d %v, want seat %s as %s", status, res, want.Seat, want.Op)
		}
	}
}

// Issue 26: a token that is not this hub's to take is refused, each with
// its status, its RFC 6750 error and a sentence that says why: expired,
// issued for another resource, by another issuer, altered after signing,
// without the required scope, or naming nobody in the company (an unknown
// subject, or an e-mail the provider did not verify).
func TestOAuthRefusals(t *testing.T) {
	r := newOAuthRig(t)
	ctx := context.Background()
	token := func(f func() (string, error)) string {
		t.Helper()
		tok, err := f()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	svc := func(scopes ...string) func() (string, error) {
		return func() (string, error) { return r.idp.ServiceToken(ctx, scopes...) }
	}
	good := token(svc("crewlet"))

	r.idp.SetLifetime(-time.Hour)
	expired := token(svc("crewlet"))
	r.idp.SetLifetime(5 * time.Minute)

	r.idp.SetAudience("https://elsewhere.example/mcp")
	elsewhere := token(svc("crewlet"))
	r.idp.SetAudience(r.url + "/operator/mcp")

	other := idp.Start(t, r.url+"/operator/mcp", oauthUsers...)
	otherIssuer := token(func() (string, error) { return other.ServiceToken(ctx, "crewlet") })

	parts := strings.Split(good, ".")
	claims := []byte(parts[1])
	claims[len(claims)/2] ^= 0x01 // one bit of the claims, after signing
	tampered := parts[0] + "." + string(claims) + "." + parts[2]

	for _, tc := range []struct {
		name, token string
		status      int
		code, says  string
	}{
		{"expired", expired, 401, "invalid_token", "the token expired at"},
		{"another audience", elsewhere, 401, "invalid_token", "not for this hub"},
		{"another issuer", otherIssuer, 401, "invalid_token", "is not one " + r.idp.Issuer + " signed"},
		{"tampered", tampered, 401, "invalid_token", "is not one " + r.idp.Issuer + " signed"},
		{"no scope", token(svc()), 403, "insufficient_scope", "lacks the scope crewlet"},
		{"unmapped subject", token(func() (string, error) { return r.idp.UserToken(ctx, "carl", "carl-pw", "openid", "email", "crewlet") }),
			403, "", `subject "u-carl" names no person's seat`},
		{"unverified e-mail", token(func() (string, error) { return r.idp.UserToken(ctx, "eve", "eve-pw", "openid", "email", "crewlet") }),
			403, "", `subject "u-eve" names no person's seat`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, route := range [][2]string{{http.MethodPost, "/operator/mcp"}, {http.MethodGet, "/tools"}} {
				status, cs, body := r.get(t, route[0], route[1], tc.token)
				p := bearerParams(t, cs)
				if status != tc.status || p["error"] != tc.code || !strings.Contains(body, tc.says) || p["resource_metadata"] == "" {
					t.Errorf("%s %s: %d %+v %q, want %d error=%q saying %q", route[0], route[1], status, p, body, tc.status, tc.code, tc.says)
				}
			}
		})
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", good); status != http.StatusOK {
		t.Fatalf("the good token beside them: %d %s", status, body)
	}
}

// Issue 26: a key rotation at the provider is followed. The hub holds the
// provider's old key; a token signed with the new one names a key it does
// not hold, so it fetches the key set again and takes it, and a token
// signed with the withdrawn key is refused from then on.
func TestOAuthKeyRotationFollowed(t *testing.T) {
	r := newOAuthRig(t)
	ctx := context.Background()
	before, err := r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", before); status != http.StatusOK {
		t.Fatalf("before the rotation: %d %s", status, body)
	}
	r.idp.RotateKey()
	after, err := r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	var listing struct{ Tools []any }
	status, _, body := r.get(t, http.MethodGet, "/tools", after)
	if status != http.StatusOK || json.Unmarshal([]byte(body), &listing) != nil || len(listing.Tools) == 0 {
		t.Fatalf("a token signed with the new key: %d %s", status, body)
	}
	if status, _, body := r.get(t, http.MethodGet, "/tools", before); status != http.StatusUnauthorized || !strings.Contains(body, "signed") {
		t.Fatalf("a token signed with the withdrawn key: %d %s", status, body)
	}
}

// Issue 26: a hub whose identity provider does not answer still starts and
// still takes its static tokens; a token it cannot check for want of the
// provider's keys is answered 503 with a sentence naming the provider, not
// taken for a bad token.
func TestOAuthProviderUnreachable(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	issuer := gone.URL
	gone.Close()
	c := hubtest.NewCompany().Role(`{name: Ada, handle: ada, kind: human, admin: true, oidc_subject: u-ada}`).
		AdminToken("ci", "CI_TOKEN").OAuth(fmt.Sprintf(`{issuer: %q}`, issuer)).Parse(t)
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{kitServer()},
		Env: hubtest.NewEnv(map[string]string{"CI_TOKEN": oauthAdminToken}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	r := &oauthRig{url: hubtest.Serve(t, h.Handler())}
	if status, _, body := r.get(t, http.MethodGet, "/tools", oauthAdminToken); status != http.StatusOK {
		t.Fatalf("the static token: %d %s", status, body)
	}
	status, _, body := r.get(t, http.MethodGet, "/tools", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "identity provider "+issuer+" could not be asked") {
		t.Fatalf("a token while the provider is down: %d %s", status, body)
	}
}
