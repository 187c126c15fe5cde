// Package grants is the credential minter for remote MCP servers that say
// auth: oauth (issue 26): a person authorizes a server for one seat at the
// server's authorization server (authorization code with PKCE), and the
// seat's child then carries that seat's own access token on every request.
//
// The server's authorization server is found as the MCP authorization spec
// says (RFC 9728 protected resource metadata, then RFC 8414 or OpenID
// discovery); the hub is a client there by the configured client_id, or by
// registering itself (RFC 7591) where no client is configured. Tokens are
// sealed in the hub's grant store, refreshed ahead of their expiry, and
// revoked (RFC 7009) when the seat no longer runs the server. A grant the
// person refused, or a refresh the authorization server refused, is a
// refusal the seat's row shows until a person authorizes again.
//
// No token is read or made here: they are opaque strings the authorization
// server issues and the resource server checks.
package grants

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Vault keeps sealed values by name (secrets.Store).
type Vault interface {
	Set(name, value string) error
	Lookup(name string) (string, bool)
	Delete(name string) (bool, error)
}

// Server is what the minter needs of an auth: oauth server, resolved.
type Server struct {
	Name string
	// URL is the server's resolved url: the resource the tokens are for.
	URL string
	// ClientID and ClientSecret are the configured client, if any.
	ClientID, ClientSecret string
	Scopes                 []string
}

// State is where one seat's grant stands.
type State int

const (
	// Missing: nobody has authorized the server for the seat yet.
	Missing State = iota
	// Granted: the seat holds a token.
	Granted
	// Refused: the authorization server refused the grant or its refresh;
	// a person must authorize again.
	Refused
)

// record is one seat's grant as sealed.
type record struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Issued is when the access token was had, so the refresh can be
	// placed at a share of its life.
	Issued time.Time `json:"issued"`
	// The client and endpoints the grant was made with: a refresh and a
	// revocation must use the same, whatever the configuration says by
	// then.
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret,omitempty"`
	TokenURL     string   `json:"token_url"`
	RevokeURL    string   `json:"revoke_url,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
}

func (r *record) config() *oauth2.Config {
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: r.TokenURL}}
}

// Options configure a Minter.
type Options struct {
	Vault Vault
	// HTTPClient reaches the servers' metadata and authorization servers;
	// http.DefaultClient if nil.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Changed is told that a seat's grant arrived, was refused or lapsed:
	// the hub reconciles the seat's children then. It must not block long.
	Changed func(server, seat string)
	// Held is told the tokens of a grant (access and refresh) as the
	// minter comes to hold them: received, read back from the vault, or
	// renewed, before any request carries them, so the hub redacts them
	// wherever it redacts a configured secret. It must not block long.
	Held func(tokens ...string)
	// PendingTTL bounds how long an authorization may take; 10 minutes if
	// zero.
	PendingTTL time.Duration
	// Pending keeps the authorizations under way; nil keeps them in this
	// process.
	Pending PendingStore
	// Acting, if set, says whether this node acts for a seat now. In a
	// fleet the vault is every node's, and only the node running the seat
	// renews its grant: a node the seat has left lets its copy go rather
	// than renew it, since two nodes renewing one grant spend one refresh
	// token twice, and an authorization server that rotates them refuses
	// the second — which would end the grant for the seat everywhere.
	// Nil: this node acts for every seat.
	Acting func(seat string) bool
}

// Minter mints and keeps the seats' grants.
type Minter struct {
	opts Options

	mu sync.Mutex
	// live holds every grant this process has read or made, by key.
	live map[string]*seatGrant
	// refused holds why a seat's grant was refused, by key.
	refused map[string]string
	// clients holds the clients registered by DCR, by server and redirect.
	clients map[string]registered
	closed  bool
}

type seatGrant struct {
	server, seat string
	rec          record
	timer        *time.Timer
}

type registered struct{ id, secret string }

// New builds a minter.
func New(o Options) *Minter {
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Changed == nil {
		o.Changed = func(string, string) {}
	}
	if o.Held == nil {
		o.Held = func(...string) {}
	}
	if o.PendingTTL <= 0 {
		o.PendingTTL = 10 * time.Minute
	}
	if o.Pending == nil {
		o.Pending = &memoryPending{m: map[string]memoryEntry{}}
	}
	return &Minter{opts: o, live: map[string]*seatGrant{}, refused: map[string]string{},
		clients: map[string]registered{}}
}

func key(server, seat string) string { return server + "\x00" + seat }

// vaultName is the sealed name of a seat's grant: a digest, so no server
// or seat name can make two grants share one, and the name says nothing.
func vaultName(server, seat string) string {
	sum := sha256.Sum256([]byte("crewlet oauth grant\x00" + key(server, seat)))
	return "CREWLET_OAUTH_GRANT_" + strings.ToUpper(hex.EncodeToString(sum[:12]))
}

// State says where a seat's grant stands, and for a refusal why.
func (m *Minter) State(server, seat string) (State, string) {
	if m.grant(server, seat) != nil {
		return Granted, ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if why, ok := m.refused[key(server, seat)]; ok {
		return Refused, why
	}
	return Missing, ""
}

// grant is a seat's grant: the one in memory, or the sealed one read back
// (after a restart), whose refresh is then placed.
func (m *Minter) grant(server, seat string) *seatGrant {
	k := key(server, seat)
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.live[k]; g != nil {
		return g
	}
	if _, no := m.refused[k]; no || m.closed {
		return nil
	}
	raw, ok := m.opts.Vault.Lookup(vaultName(server, seat))
	if !ok {
		return nil
	}
	var rec record
	if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.AccessToken == "" {
		m.opts.Logger.Error("oauth_grant_unreadable", "server", server, "seat", seat)
		return nil
	}
	m.opts.Held(rec.AccessToken, rec.RefreshToken)
	g := &seatGrant{server: server, seat: seat, rec: rec}
	m.live[k] = g
	m.scheduleLocked(g)
	return g
}

// AccessToken is the seat's current access token, "" if it holds none.
func (m *Minter) AccessToken(server, seat string) string {
	g := m.grant(server, seat)
	if g == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return g.rec.AccessToken
}

// Transport sends the seat's own token on every request through base
// (http.DefaultTransport if nil), over any Authorization the server's
// headers set: the seat's grant is who the child acts as.
func (m *Minter) Transport(server, seat string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return bearerRT{m: m, server: server, seat: seat, base: base}
}

type bearerRT struct {
	m            *Minter
	server, seat string
	base         http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	tok := b.m.AccessToken(b.server, b.seat)
	if tok == "" {
		return nil, fmt.Errorf("MCP server %q holds no grant for seat %s", b.server, b.seat)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(r)
}

// refreshLead is how long before expiry a token is refreshed: a fifth of
// its life, at most five minutes, so a call never goes out on a token
// about to lapse and a short-lived one is still renewed in time.
func refreshLead(issued, expiry time.Time) time.Duration {
	lead := expiry.Sub(issued) / 5
	return min(lead, 5*time.Minute)
}

// scheduleLocked places g's next refresh; a grant without a refresh token
// or an expiry lives until the server refuses it.
func (m *Minter) scheduleLocked(g *seatGrant) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	if m.closed || g.rec.RefreshToken == "" || g.rec.Expiry.IsZero() {
		return
	}
	at := g.rec.Expiry.Add(-refreshLead(g.rec.Issued, g.rec.Expiry))
	g.timer = time.AfterFunc(time.Until(at), func() { m.refresh(g) })
}

// refresh renews g's token. A refusal by the authorization server ends
// the grant; a failure to reach it is tried again shortly, while the
// token may still be good.
func (m *Minter) refresh(g *seatGrant) {
	m.mu.Lock()
	if m.closed || m.live[key(g.server, g.seat)] != g {
		m.mu.Unlock()
		return
	}
	rec := g.rec
	if m.opts.Acting != nil && !m.opts.Acting(g.seat) {
		// The seat's holder renews it; this node reads the grant again
		// if the seat comes back.
		delete(m.live, key(g.server, g.seat))
		m.mu.Unlock()
		m.opts.Logger.Info("oauth_grant_let_go", "server", g.server, "seat", g.seat, "reason", "this node no longer acts for the seat; the node that does renews its grant")
		return
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.opts.HTTPClient)
	tok, err := rec.config().TokenSource(ctx, &oauth2.Token{RefreshToken: rec.RefreshToken}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			why := fmt.Sprintf("MCP server %q: the authorization server refused to renew seat %s's grant (%s); a person must authorize it again from the server's page on Settings › MCP Tools.",
				g.server, g.seat, describe(re))
			m.opts.Logger.Error("oauth_refresh_refused", "server", g.server, "seat", g.seat, "reason", why)
			m.refuse(g.server, g.seat, why)
			return
		}
		m.opts.Logger.Warn("oauth_refresh_failed", "server", g.server, "seat", g.seat, "error", err.Error())
		m.mu.Lock()
		if !m.closed && m.live[key(g.server, g.seat)] == g {
			g.timer = time.AfterFunc(5*time.Second, func() { m.refresh(g) })
		}
		m.mu.Unlock()
		return
	}
	m.opts.Held(tok.AccessToken, tok.RefreshToken)
	next := rec
	next.AccessToken, next.TokenType, next.Expiry, next.Issued = tok.AccessToken, tok.TokenType, tok.Expiry, time.Now()
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken
	}
	if err := m.seal(g.server, g.seat, next); err != nil {
		m.opts.Logger.Error("oauth_grant_unsealed", "server", g.server, "seat", g.seat, "error", err.Error())
	}
	m.mu.Lock()
	if m.live[key(g.server, g.seat)] == g {
		g.rec = next
		m.scheduleLocked(g)
	}
	m.mu.Unlock()
	m.opts.Logger.Info("oauth_token_refreshed", "server", g.server, "seat", g.seat, "expires", next.Expiry.UTC().Format(time.RFC3339))
}

// describe says what an authorization server's refusal said, bounded.
func describe(re *oauth2.RetrieveError) string {
	s := re.ErrorCode
	if re.ErrorDescription != "" {
		s += ": " + re.ErrorDescription
	}
	if s == "" {
		s = re.Response.Status
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (m *Minter) seal(server, seat string, rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return m.opts.Vault.Set(vaultName(server, seat), string(b))
}

// Heard takes a change of a seat's grant made on another node of a fleet:
// a grant made or renewed there is read from the vault again when next
// needed, and a refusal (refused: why) stands here as it does there.
func (m *Minter) Heard(server, seat, refused string) {
	k := key(server, seat)
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.live[k]; g != nil && g.timer != nil {
		g.timer.Stop()
	}
	delete(m.live, k)
	if refused != "" {
		m.refused[k] = refused
	} else {
		delete(m.refused, k)
	}
}

// refuse ends a seat's grant with why, and tells the hub.
func (m *Minter) refuse(server, seat, why string) {
	k := key(server, seat)
	m.mu.Lock()
	if g := m.live[k]; g != nil && g.timer != nil {
		g.timer.Stop()
	}
	delete(m.live, k)
	m.refused[k] = why
	m.mu.Unlock()
	if _, err := m.opts.Vault.Delete(vaultName(server, seat)); err != nil {
		m.opts.Logger.Error("oauth_grant_undeleted", "server", server, "seat", seat, "error", err.Error())
	}
	m.opts.Changed(server, seat)
}

// Revoke ends a seat's grant for good: at the authorization server (RFC
// 7009) where it offers revocation, and in the grant store. It is for a
// seat that no longer runs the server, not for a seat moving to another
// node, which needs the grant still.
func (m *Minter) Revoke(ctx context.Context, server, seat string) {
	g := m.grant(server, seat)
	k := key(server, seat)
	m.mu.Lock()
	if g != nil && g.timer != nil {
		g.timer.Stop()
	}
	delete(m.live, k)
	delete(m.refused, k)
	m.mu.Unlock()
	if g == nil {
		return
	}
	if _, err := m.opts.Vault.Delete(vaultName(server, seat)); err != nil {
		m.opts.Logger.Error("oauth_grant_undeleted", "server", server, "seat", seat, "error", err.Error())
	}
	if g.rec.RevokeURL == "" {
		m.opts.Logger.Info("oauth_grant_forgotten", "server", server, "seat", seat, "reason", "the authorization server offers no revocation endpoint")
		return
	}
	tok, hint := g.rec.RefreshToken, "refresh_token"
	if tok == "" {
		tok, hint = g.rec.AccessToken, "access_token"
	}
	if err := m.revoke(ctx, g.rec, tok, hint); err != nil {
		m.opts.Logger.Warn("oauth_revoke_failed", "server", server, "seat", seat, "error", err.Error())
		return
	}
	m.opts.Logger.Info("oauth_grant_revoked", "server", server, "seat", seat)
}

func (m *Minter) revoke(ctx context.Context, rec record, tok, hint string) error {
	form := url.Values{"token": {tok}, "token_type_hint": {hint}}
	if rec.ClientSecret == "" {
		form.Set("client_id", rec.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(rec.ClientSecret))
	}
	resp, err := m.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the revocation endpoint answered %s", resp.Status)
	}
	return nil
}

// Close stops every refresh.
func (m *Minter) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, g := range m.live {
		if g.timer != nil {
			g.timer.Stop()
		}
	}
}
