package hub

import (
	"context"
	"fmt"
	"net/http"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/grants"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/servers/upstream"
)

// A remote server declared auth: oauth runs one child per seat, each
// carrying that seat's own access token (issue 26). Until a person has
// authorized the server for the seat, the seat's child waits for the grant
// (Waiting for credentials, mcp_server_awaiting_credential: CFG-3, MCP-11,
// MCP-12); the grant's arrival reconciles the seat, so the child starts by
// itself; a refusal, or a refresh the authorization server refuses, holds
// it back as failed (mcp_server_failed) until a person authorizes again.

// newGrants builds the minter over the hub's grant store, nil without one.
func (h *Hub) newGrants() *grants.Minter {
	if h.opts.Grants == nil {
		return nil
	}
	o := grants.Options{Vault: h.opts.Grants, Logger: h.log.With("component", "oauth_grants"),
		Changed: h.grantChanged, Held: h.redactAlso}
	if h.grantPending != nil {
		o.Pending = h.grantPending
	}
	if h.opts.Fleet != nil {
		o.Acting = h.seats.acting
	}
	return grants.New(o)
}

// grantChanged reconciles the seat whose grant arrived, was refused or
// lapsed here, from the revision in force, and tells the fleet's other
// nodes (fleet_grants.go).
func (h *Hub) grantChanged(server, seat string) {
	h.tellGrant(server, seat)
	h.reconcileGrantSeat(seat)
}

// reconcileGrantSeat reconciles a seat whose grant changed.
func (h *Hub) reconcileGrantSeat(seat string) {
	if h.life.Err() != nil || h.Company() == nil {
		return
	}
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.servers.reconcileSeat(h.Company(), seat)
}

// grantHold is why a seat's child of an auth: oauth server may not start
// yet, or nil once the seat holds a grant.
func (u *supervision) grantHold(w config.Instance) *upstream.Hold {
	if u.grants == nil {
		return &upstream.Hold{State: upstream.Failed, Sentence: fmt.Sprintf(
			"MCP server %q takes a grant per seat (auth: oauth), and this node keeps no grant store; run it with a data directory.", w.Server.Name)}
	}
	switch st, why := u.grants.State(w.Server.Name, w.Seat); st {
	case grants.Granted:
		return nil
	case grants.Refused:
		return &upstream.Hold{State: upstream.Failed, Sentence: why}
	}
	return &upstream.Hold{State: upstream.Waiting, Integration: "oauth", Sentence: fmt.Sprintf(
		"MCP server %q is waiting for seat %s's grant: an administrator authorizes it from the server's page on Settings › MCP Tools, and it starts once the grant arrives.",
		w.Server.Name, w.Seat)}
}

// logHold writes why an instance is held back: waiting for a credential
// that is coming, failed for one nothing will supply, or failed for a
// grant the authorization server refused.
func (u *supervision) logHold(w config.Instance, hold *upstream.Hold) {
	switch {
	case hold.State == upstream.Waiting:
		u.log.Info("mcp_server_awaiting_credential", "server", w.Server.Name, "seat", w.Seat, "variable", hold.Variable, "integration", hold.Integration, "reason", hold.Sentence)
	case hold.Variable == "":
		u.log.Error("mcp_server_failed", "server", w.Server.Name, "seat", w.Seat, "reason", hold.Sentence)
	default:
		u.log.Error("mcp_server_credential_missing", "server", w.Server.Name, "seat", w.Seat, "variable", hold.Variable, "reason", hold.Sentence)
	}
}

// grantClient is the HTTP client a seat's child of an auth: oauth server
// dials with: every request carries the seat's current token.
func (u *supervision) grantClient(decl config.MCPServer, seat string) *http.Client {
	if !decl.UsesOAuth() || seat == "" || u.grants == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: u.grants.Transport(decl.Name, seat, t)}
}

// revokeGrant ends the grant of a seat the revision no longer runs the
// server for (not of one moving to another node, which still needs it).
func (u *supervision) revokeGrant(decl config.MCPServer, seat string) {
	if !decl.UsesOAuth() || seat == "" || u.grants == nil {
		return
	}
	go u.grants.Revoke(context.Background(), decl.Name, seat)
}

// seatGrants is the screen's way to the minter: which seats take a grant
// for a server and where each stands, and the authorization itself.
type seatGrants struct{ h *Hub }

var _ screen.Grants = seatGrants{}

func (g seatGrants) minter() *grants.Minter { return g.h.servers.grants }

func (g seatGrants) SeatGrants(server string) []screen.SeatGrant {
	m := g.minter()
	if m == nil {
		return nil
	}
	var out []screen.SeatGrant
	for _, w := range g.h.Company().Instances() {
		if w.Server.Name != server || !w.Server.UsesOAuth() || w.Seat == "" {
			continue
		}
		sg := screen.SeatGrant{Seat: w.Seat, State: "Waiting for a grant"}
		switch st, why := m.State(server, w.Seat); st {
		case grants.Granted:
			sg.State = "Granted"
		case grants.Refused:
			sg.State, sg.Reason = "Refused", why
		}
		out = append(out, sg)
	}
	return out
}

func (g seatGrants) Begin(ctx context.Context, server, seat, redirect, binding string) (string, error) {
	m := g.minter()
	if m == nil {
		return "", fmt.Errorf("this node keeps no grant store")
	}
	for _, w := range g.h.Company().Instances() {
		if w.Server.Name != server || w.Seat != seat || !w.Server.UsesOAuth() {
			continue
		}
		srv, err := g.h.grantServer(w)
		if err != nil {
			return "", err
		}
		return m.Begin(ctx, srv, seat, redirect, binding)
	}
	return "", fmt.Errorf("seat %s runs no MCP server %q that takes a grant", seat, server)
}

func (g seatGrants) Complete(ctx context.Context, a grants.Answer, check func(string) error) (string, string, error) {
	m := g.minter()
	if m == nil {
		return "", "", fmt.Errorf("this node keeps no grant store")
	}
	return m.Complete(ctx, a, check)
}

// grantServer resolves what the minter needs of a seat's server: its url
// and the configured client's secret, by the hub's own ${VAR} rules.
func (h *Hub) grantServer(w config.Instance) (grants.Server, error) {
	resolved, hold := upstream.Resolve(w.Server.Declared(), w.Block, upstream.Lookup(h.opts.Env), h.opts.DataDir)
	if hold != nil {
		return grants.Server{}, fmt.Errorf("%s", hold.Sentence)
	}
	srv := grants.Server{Name: w.Server.Name, URL: resolved.URL}
	if o := w.Server.OAuth; o != nil {
		srv.ClientID, srv.Scopes = o.ClientID, o.Scopes
		if o.ClientSecret != "" {
			v, missing := upstream.Expand(o.ClientSecret, upstream.Lookup(h.opts.Env))
			if len(missing) > 0 {
				return grants.Server{}, fmt.Errorf("MCP server %q: oauth.client_secret names ${%s}, which is not set; seal it with `%s` and POST /config/reload", w.Server.Name, missing[0], upstream.SealCommand(missing[0], h.opts.DataDir))
			}
			srv.ClientSecret = v
		}
	}
	return srv, nil
}
