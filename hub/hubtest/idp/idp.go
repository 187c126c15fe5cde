// Package idp starts a real OpenID Connect provider for tests: zitadel's
// OpenID provider (pkg/op) on loopback, with the storage of its example
// server and its login form, so tests of the hub as an OAuth resource
// server (issue 26) meet discovery, a published key set, the client
// credentials grant and the authorization code grant with PKCE as a
// company's identity provider serves them. The provider signs every token
// with its own key: its grants issue them, and Forge only for what no
// grant of it issues (dates ahead, another JOSE type).
//
// What the example storage decides for a demo, the provider here decides
// as a company's provider would be set up for the hub: access tokens are
// JWTs (RFC 9068) for the hub's resource, carrying their scopes and the
// person's verified e-mail; and its signing key can be rotated.
package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
	"golang.org/x/text/language"
)

// The provider's clients: a service that signs in with its own secret
// (the example storage's service user), and an IDE assistant, a public
// client that must use PKCE.
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
	IDEClientID         = "crewlet-ide"
	// RedirectURL is where the IDE client is sent back with its code;
	// tests read the code off the redirect and never follow it.
	RedirectURL = "http://localhost/auth/callback"
)

// User is a person the provider knows.
type User struct {
	Subject  string
	Username string
	Password string
	Email    string
	// Unverified leaves the e-mail unverified.
	Unverified bool
}

// Provider is a running identity provider.
type Provider struct {
	Issuer string
	store  *store
	// keyFetches counts GET /keys.
	keyFetches atomic.Int64
}

// Start runs a provider on loopback until the test ends. Its tokens name
// audience (the hub's resource) until SetAudience says otherwise.
func Start(t testing.TB, audience string, users ...User) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	people := userStore(users)
	s := &store{
		Storage:  storage.NewStorageWithClients(people, clients()),
		people:   people,
		audience: []string{audience},
		lifetime: 5 * time.Minute,
	}
	s.rotate()
	p := &Provider{Issuer: issuer, store: s}
	op := exampleop.SetupServer(issuer, s, nil, false)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			p.keyFetches.Add(1)
		}
		op.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// KeyFetches counts the requests for the provider's published key set.
func (p *Provider) KeyFetches() int64 { return p.keyFetches.Load() }

// Forge signs claims with the provider's current key under the JOSE type
// typ (none if empty), for what a provider's own grants never issue: a
// token dated ahead, as a provider whose clock runs fast signs it, or a
// token of another type (a logout token, a DPoP proof) its key signed
// for another purpose. iss is the provider's unless claims name one.
func (p *Provider) Forge(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	p.store.mu.Lock()
	k := p.store.key
	p.store.mu.Unlock()
	opts := (&jose.SignerOptions{}).WithHeader("kid", k.id)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := claims["iss"]; !ok {
		claims["iss"] = p.Issuer
	}
	body, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// SetAudience changes the audience of the tokens issued from now on.
func (p *Provider) SetAudience(aud ...string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.audience = aud
}

// SetLifetime changes how long tokens issued from now on live; a negative
// lifetime issues tokens already expired, as a provider whose clock runs
// behind would.
func (p *Provider) SetLifetime(d time.Duration) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.lifetime = d
}

// RotateKey signs with a new key from now on and withdraws the old one
// from the published key set.
func (p *Provider) RotateKey() { p.store.rotate() }

// ServiceToken is an access token for the service client by the client
// credentials grant. The answer is read as plain JSON, not by an OAuth
// client library, which refuses the negative expires_in of a token issued
// already expired (SetLifetime).
func (p *Provider) ServiceToken(ctx context.Context, scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(ServiceClientID, ServiceClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("idp: the token endpoint answered %s: %w", resp.Status, err)
	}
	if out.AccessToken == "" {
		return "", fmt.Errorf("idp: no token by client credentials: %s %s", out.Error, out.Description)
	}
	return out.AccessToken, nil
}

// UserToken is an access token for a person, by the authorization code
// grant with PKCE, the login form filled in as the person would.
func (p *Provider) UserToken(ctx context.Context, username, password string, scopes ...string) (string, error) {
	cfg := &oauth2.Config{ClientID: IDEClientID, RedirectURL: RedirectURL, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer + "/auth", TokenURL: p.Issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	res, err := p.SignIn(username, password)(ctx, &auth.AuthorizationArgs{URL: cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier))})
	if err != nil {
		return "", err
	}
	tok, err := cfg.Exchange(ctx, res.Code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// SignIn is an authorization code fetcher, as an MCP client is given one:
// it opens the authorization URL, fills in the provider's login form and
// reads the code off the redirect back to the client.
func (p *Provider) SignIn(username, password string) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		c := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if "http://"+req.URL.Host != p.Issuer {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		id := resp.Request.URL.Query().Get("authRequestID")
		if resp.StatusCode != http.StatusOK || id == "" {
			return nil, fmt.Errorf("idp: the authorization URL led to %s (%s), not to the login form", resp.Request.URL, resp.Status)
		}
		form := url.Values{"id": {id}, "username": {username}, "password": {password}}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/login/username", strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err = c.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		back, err := resp.Location()
		if err != nil {
			return nil, fmt.Errorf("idp: signing in as %s was not sent back to the client (%s)", username, resp.Status)
		}
		q := back.Query()
		if q.Get("code") == "" {
			return nil, fmt.Errorf("idp: signing in as %s was sent back without a code: %s", username, back)
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

func clients() map[string]*storage.Client {
	return map[string]*storage.Client{IDEClientID: storage.NativeClient(IDEClientID, RedirectURL)}
}

type userMap map[string]*storage.User

func userStore(us []User) userMap {
	m := userMap{}
	for _, u := range us {
		m[u.Subject] = &storage.User{ID: u.Subject, Username: u.Username, Password: u.Password,
			Email: u.Email, EmailVerified: !u.Unverified, PreferredLanguage: language.English}
	}
	return m
}

func (m userMap) GetUserByID(id string) *storage.User { return m[id] }
func (m userMap) GetUserByUsername(name string) *storage.User {
	for _, u := range m {
		if u.Username == name {
			return u
		}
	}
	return nil
}
func (userMap) ExampleClientID() string { return "service" }

// store is the example storage with the decisions of a provider set up
// for the hub.
type store struct {
	*storage.Storage
	people userMap

	mu       sync.Mutex
	audience []string
	lifetime time.Duration
	key      *signingKey
	// web are clients added while running (AddWebClient).
	web map[string]*storage.Client
	// secrets are the web clients' secrets.
	secrets map[string]string
	// opaqueWeb makes the web clients' access tokens opaque (OpaqueTokens).
	opaqueWeb bool
}

func (s *store) rotate() {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = &signingKey{id: rand.Text(), key: k}
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet publishes only the current key: a token signed with a withdrawn
// one no longer verifies.
func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{s.key}}, nil
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	w := s.web[id]
	s.mu.Unlock()
	if w != nil {
		c := jwtClient{storage.RedirectGlobsClient(w)}
		if s.opaque() {
			return opaqueClient{c}, nil
		}
		return c, nil
	}
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if _, err := s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes); err != nil {
		return nil, err
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: s.audienceFor(id), Scopes: scopes}, nil
}

func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return forResource{r, s.audienceFor(r.GetClientID())}, nil
}

func (s *store) audienceFor(client string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Clone(s.audience), client)
}

func (s *store) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, _, err := s.Storage.CreateAccessToken(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	return id, time.Now().Add(s.lifetime), err
}

// GetPrivateClaimsFromRequest writes what the hub reads beside the
// registered claims: the scopes granted (RFC 9068 "scope") and, for a
// person who asked for the email scope, the e-mail and whether it is
// verified.
func (s *store) GetPrivateClaimsFromRequest(ctx context.Context, r op.TokenRequest, _ []string) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(r.GetScopes(), " ")}
	if slices.Contains(r.GetScopes(), oidc.ScopeEmail) {
		if u := s.people.GetUserByID(r.GetSubject()); u != nil {
			claims["email"], claims["email_verified"] = u.Email, u.EmailVerified
		}
	}
	return claims, nil
}

// jwtClient issues JWT access tokens and may ask for any scope.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (jwtClient) IsScopeAllowed(string) bool          { return true }
func (jwtClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// opaqueClient issues access tokens opaque to their holder, as many
// providers do: zitadel's are encrypted (JWE, five parts), which no
// credential shape covers whole.
type opaqueClient struct{ jwtClient }

func (opaqueClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }

func (s *store) opaque() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opaqueWeb
}

// OpaqueTokens makes the access tokens of the web clients (AddWebClient)
// opaque: a server they are for asks the provider's userinfo endpoint
// whose a token is (ProtectedServer does).
func (p *Provider) OpaqueTokens() {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.opaqueWeb = true
}

func (p *Provider) opaque() bool { return p.store.opaque() }

// forResource is an authorization request whose tokens are for the hub.
type forResource struct {
	op.AuthRequest
	aud []string
}

func (r forResource) GetAudience() []string { return r.aud }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

// AddWebClient registers a confidential client (client secret, code flow
// with refresh tokens) whose answers go back to redirect: a hub's callback,
// known only once the hub listens.
func (p *Provider) AddWebClient(id, secret, redirect string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if p.store.web == nil {
		p.store.web, p.store.secrets = map[string]*storage.Client{}, map[string]string{}
	}
	p.store.web[id], p.store.secrets[id] = storage.WebClient(id, secret, redirect), secret
}

// EndSessions withdraws every token the provider issued to client for the
// person, refresh tokens included, as an administrator ending a person's
// sessions at the provider would: the next refresh is refused.
func (p *Provider) EndSessions(ctx context.Context, subject, client string) error {
	return p.store.TerminateSession(ctx, subject, client)
}

func (s *store) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	s.mu.Lock()
	want, ok := s.secrets[id]
	s.mu.Unlock()
	if ok {
		if secret != want {
			return fmt.Errorf("invalid secret")
		}
		return nil
	}
	return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
}

// CreateAccessAndRefreshTokens lets access tokens issued with a refresh
// token live as long as SetLifetime says, too.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	// The example storage reads the client off its own request type, which
	// forResource hides.
	if fr, ok := r.(forResource); ok {
		r = fr.AuthRequest
	}
	id, refresh, _, err := s.Storage.CreateAccessAndRefreshTokens(ctx, r, current)
	s.mu.Lock()
	defer s.mu.Unlock()
	return id, refresh, time.Now().Add(s.lifetime), err
}
