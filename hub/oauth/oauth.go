// Package oauth makes the hub an OAuth 2.1 resource server for the
// company's identity provider (issue 26): it checks the provider's JWT
// access tokens (signature against the provider's published keys, issuer,
// expiry, audience, scopes) with a maintained OIDC library, maps each to
// the person's seat it names, and describes the hub as a protected resource
// (RFC 9728) so that an MCP client can find where to sign in.
//
// go-oidc verifies the JWT against the hub's own key set (keys.go), which
// reads the provider's keys anew when a token names a key it does not
// hold, a bounded number of times per issuer, which is how a key rotation
// at the provider is followed. A token that verified is remembered until
// it expires (cache.go); its type and dates are read as claims.go says.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/crewlet/hub/authority"
	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Config is what the company file declares: the provider, what the hub
// requires of its tokens, and who each token may be.
type Config struct {
	Issuer string
	// Audience is accepted beside the hub's own resource URL, for
	// providers that write an audience of their own naming.
	Audience string
	Scopes   []string
	People   []Person
}

// Person is a seat a token can act as: by its subject, or by the e-mail the
// provider verified.
type Person struct {
	Seat    string
	Subject string
	Email   string
	Admin   bool
}

// CredentialPrefix starts the credential id a token's writes are
// attributed with (OPS-4): the seat acts, "oidc:<subject>" is how.
const CredentialPrefix = "oidc:"

// ClockSkew is how far the hub's clock and the provider's may disagree
// before a token reads as expired: a token is taken until this long after
// its exp.
const ClockSkew = 30 * time.Second

// retryDiscovery bounds how often an unreachable provider is asked again:
// every refused request would otherwise wait on it.
const retryDiscovery = 5 * time.Second

// Refusal is why a token was not accepted, in the terms of RFC 6750: the
// status to answer, the error code for the challenge, and a sentence.
type Refusal struct {
	Status int
	// Code is "invalid_token", "insufficient_scope", or empty where the
	// token was good but names nobody here.
	Code   string
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// Verifier checks the provider's tokens. The zero value accepts nothing;
// Set gives it a configuration. It is safe for concurrent use.
type Verifier struct {
	client *http.Client
	now    func() time.Time

	mu             sync.Mutex
	cfg            *Config
	bySub, byEmail map[string]Person
	// provider verifies the tokens of cfg.Issuer, discovered once and
	// kept across revisions that name the same issuer, so its key set
	// stays warm.
	provider    *oidc.IDTokenVerifier
	keys        *keySet
	providerFor string
	lastErr     error
	lastTry     time.Time
	discovering chan struct{}
	// taken are the tokens verified, until they expire (cache.go).
	taken map[[sha256.Size]byte]takenToken
	// rev counts Set's calls: a token verified under one revision is not
	// remembered into the next.
	rev int
}

// New returns a verifier that reaches the provider with client (nil: a
// client with a timeout).
func New(client *http.Client) *Verifier {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Verifier{client: client, now: time.Now}
}

// Set replaces the configuration; nil turns token checking off.
func (v *Verifier) Set(cfg *Config) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cfg = cfg
	v.bySub, v.byEmail = map[string]Person{}, map[string]Person{}
	// Who a token is depends on the revision: every token is checked
	// anew under the next.
	clear(v.taken)
	v.rev++
	if cfg == nil {
		return
	}
	for _, p := range cfg.People {
		if p.Subject != "" {
			v.bySub[p.Subject] = p
		}
		if p.Email != "" {
			v.byEmail[foldEmail(p.Email)] = p
		}
	}
	if cfg.Issuer != v.providerFor {
		v.provider, v.keys, v.providerFor, v.lastErr, v.lastTry = nil, nil, "", nil, time.Time{}
	}
}

// Enabled reports whether a provider is configured.
func (v *Verifier) Enabled() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cfg != nil
}

// Scopes are the scopes every token must carry.
func (v *Verifier) Scopes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cfg == nil {
		return nil
	}
	return append([]string(nil), v.cfg.Scopes...)
}

// Metadata is the protected-resource document (RFC 9728) for resource, the
// URL a client reaches the hub by; nil when no provider is configured.
func (v *Verifier) Metadata(resource string) *oauthex.ProtectedResourceMetadata {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cfg == nil {
		return nil
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{v.cfg.Issuer},
		ScopesSupported:        append([]string(nil), v.cfg.Scopes...),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Crewlet hub",
	}
}

// tokenClaims are the claims beside the registered ones that decide a
// token: its scopes (RFC 9068 "scope", or the "scp" some providers write)
// and the person's e-mail.
type tokenClaims struct {
	Scope         string      `json:"scope"`
	Scp           any         `json:"scp"`
	Email         string      `json:"email"`
	EmailVerified any         `json:"email_verified"`
	NotBefore     json.Number `json:"nbf"`
}

// Verify checks a bearer token presented to the hub at one of resources
// (the URLs it may have been issued for) and returns the principal it acts
// as. A refusal is a *Refusal.
func (v *Verifier) Verify(ctx context.Context, raw string, resources []string) (authority.Principal, error) {
	verifier, keys, cfg, err := v.verifier(ctx)
	if err != nil {
		return authority.Principal{}, err
	}
	digest, rev := sha256.Sum256([]byte(raw)), v.revision()
	if p, ok := v.cached(digest, keys, cfg.Audience, resources); ok {
		return p, nil
	}
	kid, ref := accessTokenHeader(raw)
	if ref != nil {
		return authority.Principal{}, ref
	}
	tok, err := verifier.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return authority.Principal{}, &Refusal{http.StatusUnauthorized, "invalid_token",
				fmt.Sprintf("the token expired at %s; ask the identity provider for a new one", expired.Expiry.UTC().Format(time.RFC3339))}
		}
		return authority.Principal{}, &Refusal{http.StatusUnauthorized, "invalid_token",
			fmt.Sprintf("the token is not one %s signed: %v", cfg.Issuer, err)}
	}
	if !audienceFits(tok.Audience, cfg.Audience, resources) {
		want := resources
		if cfg.Audience != "" {
			want = append([]string{cfg.Audience}, resources...)
		}
		return authority.Principal{}, &Refusal{http.StatusUnauthorized, "invalid_token",
			fmt.Sprintf("the token was issued for %s, not for this hub (%s); ask for it with this hub as the resource",
				strings.Join(tok.Audience, ", "), strings.Join(want, " or "))}
	}
	var c tokenClaims
	if err := tok.Claims(&c); err != nil {
		return authority.Principal{}, &Refusal{http.StatusUnauthorized, "invalid_token", "the token's claims cannot be read: " + err.Error()}
	}
	if ref := timely(v.now(), tok.IssuedAt, c.NotBefore); ref != nil {
		return authority.Principal{}, ref
	}
	have := scopesOf(c)
	var missing []string
	for _, s := range cfg.Scopes {
		if !have[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return authority.Principal{}, &Refusal{http.StatusForbidden, "insufficient_scope",
			fmt.Sprintf("the token lacks the scope %s this hub requires; ask for it with scope %q", strings.Join(missing, ", "), strings.Join(cfg.Scopes, " "))}
	}
	p, ok := v.person(tok.Subject, c)
	if !ok {
		return authority.Principal{}, &Refusal{http.StatusForbidden, "",
			fmt.Sprintf("the token's subject %q names no person's seat in this company; an administrator sets oidc_subject (or email) on the person's role", tok.Subject)}
	}
	principal := authority.Principal{TokenID: CredentialPrefix + tok.Subject, Seat: p.Seat, Admin: p.Admin}
	v.remember(digest, rev, takenToken{principal: principal, aud: tok.Audience, kid: kid, until: tok.Expiry.Add(ClockSkew)})
	return principal, nil
}

func (v *Verifier) person(sub string, c tokenClaims) (Person, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.bySub[sub]; ok {
		return p, true
	}
	// An e-mail the provider did not verify is only what its holder typed.
	if c.Email != "" && verified(c.EmailVerified) {
		p, ok := v.byEmail[foldEmail(c.Email)]
		return p, ok
	}
	return Person{}, false
}

// verifier returns the provider's token verifier, discovering the provider
// on first use: a hub starts whether or not its provider answers, and a
// provider that comes up later is found then.
func (v *Verifier) verifier(ctx context.Context) (*oidc.IDTokenVerifier, *keySet, Config, error) {
	for {
		v.mu.Lock()
		if v.cfg == nil {
			v.mu.Unlock()
			return nil, nil, Config{}, &Refusal{http.StatusUnauthorized, "invalid_token", "this hub accepts no identity provider's tokens"}
		}
		cfg := *v.cfg
		if v.provider != nil {
			p, keys := v.provider, v.keys
			v.mu.Unlock()
			return p, keys, cfg, nil
		}
		if v.lastErr != nil && v.now().Sub(v.lastTry) < retryDiscovery {
			err := v.lastErr
			v.mu.Unlock()
			return nil, nil, cfg, unreachable(cfg.Issuer, err)
		}
		if wait := v.discovering; wait != nil {
			v.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, nil, cfg, unreachable(cfg.Issuer, ctx.Err())
			}
		}
		done := make(chan struct{})
		v.discovering = done
		v.mu.Unlock()

		// The provider keeps this context's client for its key set's
		// later fetches, so it is not the request's context.
		var idv *oidc.IDTokenVerifier
		var keys *keySet
		p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), v.client), cfg.Issuer)
		if err == nil {
			idv, keys, err = v.tokenVerifier(p, cfg.Issuer)
		}
		v.mu.Lock()
		v.discovering = nil
		if v.cfg != nil && v.cfg.Issuer == cfg.Issuer {
			v.provider, v.keys, v.providerFor, v.lastErr, v.lastTry = idv, keys, cfg.Issuer, err, v.now()
		}
		v.mu.Unlock()
		close(done)
		if err != nil {
			return nil, nil, cfg, unreachable(cfg.Issuer, err)
		}
	}
}

func (v *Verifier) tokenVerifier(p *oidc.Provider, issuer string) (*oidc.IDTokenVerifier, *keySet, error) {
	var meta struct {
		JWKS string   `json:"jwks_uri"`
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, nil, err
	}
	if meta.JWKS == "" {
		return nil, nil, errors.New("its discovery document names no jwks_uri")
	}
	var algs []string
	var joseAlgs []jose.SignatureAlgorithm
	for _, a := range meta.Algs {
		if asymmetric[a] {
			algs, joseAlgs = append(algs, a), append(joseAlgs, jose.SignatureAlgorithm(a))
		}
	}
	if len(algs) == 0 {
		algs, joseAlgs = []string{oidc.RS256}, []jose.SignatureAlgorithm{jose.RS256}
	}
	// The key set is the hub's own, not go-oidc's remote one, which reads
	// the provider's keys again on every token it cannot verify.
	keys := newKeySet(v.client, meta.JWKS, joseAlgs, v.now)
	return oidc.NewVerifier(issuer, keys, &oidc.Config{
		// The audience is the resource's, checked below against the
		// hub's configured URLs, not an OAuth client's id.
		SkipClientIDCheck:    true,
		SupportedSigningAlgs: algs,
		Now:                  func() time.Time { return v.now().Add(-ClockSkew) },
	}), keys, nil
}

// asymmetric are the signing algorithms a provider's published keys can
// verify; a shared-secret one (HS256) or none never is.
var asymmetric = map[string]bool{
	oidc.RS256: true, oidc.RS384: true, oidc.RS512: true,
	oidc.ES256: true, oidc.ES384: true, oidc.ES512: true,
	oidc.PS256: true, oidc.PS384: true, oidc.PS512: true, oidc.EdDSA: true,
}

func unreachable(issuer string, err error) *Refusal {
	return &Refusal{http.StatusServiceUnavailable, "",
		fmt.Sprintf("the identity provider %s could not be asked for its keys, so no token of it can be checked now: %v", issuer, err)}
}

// audienceFits is RFC 8707 from the resource's side: the token must name
// this hub, by the configured audience or by a URL it is reached at.
func audienceFits(aud []string, configured string, resources []string) bool {
	if configured != "" && oauthex.MatchesResource(aud, configured) {
		return true
	}
	for _, r := range resources {
		if r != "" && oauthex.MatchesResource(aud, r) {
			return true
		}
	}
	return false
}

func scopesOf(c tokenClaims) map[string]bool {
	have := map[string]bool{}
	for _, s := range strings.Fields(c.Scope) {
		have[s] = true
	}
	switch scp := c.Scp.(type) {
	case string:
		for _, s := range strings.Fields(scp) {
			have[s] = true
		}
	case []any:
		for _, s := range scp {
			if s, ok := s.(string); ok {
				have[s] = true
			}
		}
	}
	return have
}

// verified reads email_verified, which some providers write as a string.
func verified(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}
