package grants

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// pending is an authorization sent to the authorization server and not
// back yet, as its store keeps it.
type pending struct {
	Server string `json:"server"`
	Seat   string `json:"seat"`
	// Binding ties the answer to whoever started it (the screen's session
	// and browser): the screen checks it at the callback.
	Binding  string    `json:"binding"`
	Verifier string    `json:"verifier"`
	Redirect string    `json:"redirect"`
	Rec      record    `json:"record"` // client and endpoints, no token yet
	Expires  time.Time `json:"expires"`
}

// PendingStore keeps the authorizations begun and not answered yet, by
// their state. In a fleet it is every node's: the authorization server
// sends the person back to whichever node the balancer picks.
type PendingStore interface {
	Put(ctx context.Context, state string, value []byte, ttl time.Duration) error
	// Get answers the value and the revision to Take it at;
	// ErrUnknownState when there is none.
	Get(ctx context.Context, state string) (value []byte, rev uint64, err error)
	// Take removes the value if it is still at rev; ErrUnknownState when
	// it is gone (answered by another request, or expired).
	Take(ctx context.Context, state string, rev uint64) error
}

// memoryPending keeps them in this process.
type memoryPending struct {
	mu sync.Mutex
	m  map[string]memoryEntry
}

type memoryEntry struct {
	value   []byte
	rev     uint64
	expires time.Time
}

func (p *memoryPending) Put(_ context.Context, state string, value []byte, ttl time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for s, e := range p.m {
		if now.After(e.expires) {
			delete(p.m, s)
		}
	}
	p.m[state] = memoryEntry{value: value, rev: p.m[state].rev + 1, expires: now.Add(ttl)}
	return nil
}

func (p *memoryPending) Get(_ context.Context, state string) ([]byte, uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[state]
	if !ok || time.Now().After(e.expires) {
		return nil, 0, ErrUnknownState
	}
	return e.value, e.rev, nil
}

func (p *memoryPending) Take(_ context.Context, state string, rev uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[state]; !ok || e.rev != rev {
		return ErrUnknownState
	}
	delete(p.m, state)
	return nil
}

// ErrUnknownState answers a callback that no authorization started here,
// or one already answered or too old.
var ErrUnknownState = errors.New("this authorization was not started here, was already answered, or took too long; start it again from the server's page")

// Begin starts authorizing srv for seat: it finds the server's
// authorization server, the client the hub is there, and answers the
// address to send the person to, whose answer comes back to redirect.
func (m *Minter) Begin(ctx context.Context, srv Server, seat, redirect, binding string) (string, error) {
	asm, err := m.discover(ctx, srv.URL)
	if err != nil {
		return "", err
	}
	id, secret := srv.ClientID, srv.ClientSecret
	if id == "" {
		if id, secret, err = m.register(ctx, srv, asm, redirect); err != nil {
			return "", err
		}
	}
	scopes := srv.Scopes
	if len(scopes) == 0 {
		scopes = nil
	}
	rec := record{ClientID: id, ClientSecret: secret, TokenURL: asm.TokenEndpoint, RevokeURL: asm.RevocationEndpoint, Scopes: scopes}
	cfg := rec.config()
	cfg.RedirectURL = redirect
	cfg.Endpoint.AuthURL = asm.AuthorizationEndpoint
	if secret == "" {
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	state := rand.Text()
	verifier := oauth2.GenerateVerifier()
	b, err := json.Marshal(pending{Server: srv.Name, Seat: seat, Binding: binding, Verifier: verifier,
		Redirect: redirect, Rec: rec, Expires: time.Now().Add(m.opts.PendingTTL)})
	if err != nil {
		return "", err
	}
	if err := m.opts.Pending.Put(ctx, state, b, m.opts.PendingTTL); err != nil {
		return "", fmt.Errorf("the authorization could not be recorded: %w", err)
	}
	// The resource indicator (RFC 8707) asks for a token for this server
	// alone, as the MCP authorization spec has clients do.
	return cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", srv.URL)), nil
}

// Answer is what came back to the callback.
type Answer struct {
	State, Code string
	// Error and Description are the authorization server's refusal
	// (RFC 6749 §4.1.2.1), if it refused.
	Error, Description string
}

// Complete takes the authorization server's answer: check says whether
// the binding Begin was given belongs to the request that brought it back.
// A refusal ends the seat's grant as Refused; a code is exchanged (with the
// PKCE verifier) for the seat's token, sealed, and the hub told. It answers
// which server and seat the answer was for.
func (m *Minter) Complete(ctx context.Context, a Answer, check func(binding string) error) (server, seat string, err error) {
	raw, rev, err := m.opts.Pending.Get(ctx, a.State)
	if errors.Is(err, ErrUnknownState) {
		return "", "", ErrUnknownState
	}
	if err != nil {
		return "", "", fmt.Errorf("the authorization could not be read back: %w", err)
	}
	var p pending
	if json.Unmarshal(raw, &p) != nil || time.Now().After(p.Expires) {
		return "", "", ErrUnknownState
	}
	// Checked before it is taken: an answer brought back by another
	// browser uses nothing up.
	if err := check(p.Binding); err != nil {
		return p.Server, p.Seat, err
	}
	// Single use: a replayed answer, or the same one on another node at
	// once, finds nothing.
	if err := m.opts.Pending.Take(ctx, a.State, rev); err != nil {
		return "", "", ErrUnknownState
	}
	if a.Error != "" {
		why := fmt.Sprintf("MCP server %q: the authorization for seat %s was refused at the authorization server (%s); a person must authorize it again from the server's page on Settings › MCP Tools.",
			p.Server, p.Seat, bounded(a.Error, a.Description))
		m.opts.Logger.Error("oauth_grant_refused", "server", p.Server, "seat", p.Seat, "reason", why)
		m.refuse(p.Server, p.Seat, why)
		return p.Server, p.Seat, errors.New(why)
	}
	cfg := p.Rec.config()
	cfg.RedirectURL = p.Redirect
	if p.Rec.ClientSecret == "" {
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.opts.HTTPClient)
	tok, err := cfg.Exchange(ctx, a.Code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) {
			return p.Server, p.Seat, fmt.Errorf("the authorization server could not be reached to finish the grant: %w", err)
		}
		why := fmt.Sprintf("MCP server %q: the authorization server refused the code for seat %s (%s); a person must authorize it again.", p.Server, p.Seat, describe(re))
		m.opts.Logger.Error("oauth_grant_refused", "server", p.Server, "seat", p.Seat, "reason", why)
		m.refuse(p.Server, p.Seat, why)
		return p.Server, p.Seat, errors.New(why)
	}
	m.opts.Held(tok.AccessToken, tok.RefreshToken)
	rec := p.Rec
	rec.AccessToken, rec.RefreshToken, rec.TokenType, rec.Expiry, rec.Issued = tok.AccessToken, tok.RefreshToken, tok.TokenType, tok.Expiry, time.Now()
	if err := m.seal(p.Server, p.Seat, rec); err != nil {
		return p.Server, p.Seat, fmt.Errorf("the grant could not be sealed: %w", err)
	}
	k := key(p.Server, p.Seat)
	m.mu.Lock()
	if old := m.live[k]; old != nil && old.timer != nil {
		old.timer.Stop()
	}
	g := &seatGrant{server: p.Server, seat: p.Seat, rec: rec}
	m.live[k] = g
	delete(m.refused, k)
	m.scheduleLocked(g)
	m.mu.Unlock()
	m.opts.Logger.Info("oauth_grant_received", "server", p.Server, "seat", p.Seat)
	m.opts.Changed(p.Server, p.Seat)
	return p.Server, p.Seat, nil
}

func bounded(code, desc string) string {
	s := code
	if desc != "" {
		s += ": " + desc
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// discover finds the authorization server of the server at resource: the
// resource_metadata its 401 challenge names, else the well-known protected
// resource metadata (path-inserted, then at the root), then that
// authorization server's own metadata.
func (m *Minter) discover(ctx context.Context, resource string) (*oauthex.AuthServerMeta, error) {
	var prm *oauthex.ProtectedResourceMetadata
	var errs []error
	for _, u := range m.metadataURLs(ctx, resource) {
		got, err := oauthex.GetProtectedResourceMetadata(ctx, u, resource, m.opts.HTTPClient)
		if err == nil && len(got.AuthorizationServers) > 0 {
			prm = got
			break
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if prm == nil {
		return nil, fmt.Errorf("the server at %s publishes no protected resource metadata naming an authorization server (RFC 9728): %w", resource, errors.Join(errs...))
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, m.opts.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("the authorization server %s: %w", issuer, err)
	}
	if asm == nil {
		return nil, fmt.Errorf("the authorization server %s publishes no metadata (RFC 8414 or OpenID discovery)", issuer)
	}
	return asm, nil
}

// metadataURLs lists where the resource's metadata may be, in the order
// the MCP authorization spec has a client try them.
func (m *Minter) metadataURLs(ctx context.Context, resource string) []string {
	var out []string
	if req, err := http.NewRequestWithContext(ctx, http.MethodGet, resource, nil); err == nil {
		if resp, err := m.opts.HTTPClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				if cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate")); err == nil {
					for _, c := range cs {
						if u := c.Params["resource_metadata"]; c.Scheme == "bearer" && u != "" {
							out = append(out, u)
						}
					}
				}
			}
		}
	}
	u, err := url.Parse(resource)
	if err != nil {
		return out
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		out = append(out, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-protected-resource" + p}).String())
	}
	return append(out, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-protected-resource"}).String())
}

// register makes the hub a client of the authorization server (RFC 7591)
// where no client is configured, once per server and callback.
func (m *Minter) register(ctx context.Context, srv Server, asm *oauthex.AuthServerMeta, redirect string) (string, string, error) {
	k := srv.Name + "\x00" + asm.Issuer + "\x00" + redirect
	m.mu.Lock()
	c, ok := m.clients[k]
	m.mu.Unlock()
	if ok {
		return c.id, c.secret, nil
	}
	if asm.RegistrationEndpoint == "" {
		return "", "", fmt.Errorf("the authorization server %s offers no dynamic client registration: register the hub there (redirect %s) and set oauth.client_id on MCP server %q", asm.Issuer, redirect, srv.Name)
	}
	resp, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirect}, ClientName: "Crewlet hub", TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Scope: strings.Join(srv.Scopes, " "),
	}, m.opts.HTTPClient)
	if err != nil {
		return "", "", fmt.Errorf("registering the hub at %s: %w", asm.Issuer, err)
	}
	m.mu.Lock()
	m.clients[k] = registered{id: resp.ClientID, secret: resp.ClientSecret}
	m.mu.Unlock()
	return resp.ClientID, resp.ClientSecret, nil
}
