package hub

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest/idp"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/servers/state"
)

// Issue 39, build 2 (FLT-5): a seat's upstream OAuth grant made through
// the node holding the seat is the fleet's: when that node goes and the
// seat moves, the seat's child on its new node starts with the grant and
// its calls carry the seat's own token, with nobody authorizing again.
func TestFleetSeatKeepsItsGrantWhenItMoves(t *testing.T) {
	prov, c := fleetGrantCompany(t)
	env := map[string]string{"ADA_TOKEN": "ada-token-123456", "GH_CLIENT_SECRET": grantClientSecret}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: c, StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}, func(*testNode) {})
	holder, other := placedOn(t, nodes, "alice")
	web := grantThrough(t, ctx, prov, holder)

	// The holder goes; alice moves to the other node, whose child of gh
	// starts with her grant.
	web.Close()
	holder.stop()
	eventually(t, 20*time.Second, "alice moved to node "+other.name, func() (bool, string) {
		h := other.leases.Holders()["alice"]
		return h == other.name, "held by " + h
	})
	eventually(t, 20*time.Second, "gh running for alice on node "+other.name, func() (bool, string) {
		st, why := rowState(other.hub, "gh")
		return st == rowRunning, st + ": " + why
	})
	if res := seatCall(t, other.hub, "alice", "whoami"); res.IsError || textOf(res) != "subject=u-alice-gh" {
		t.Fatalf("alice's call on node %s after the move answered %q (error %v)", other.name, textOf(res), res.IsError)
	}
}

// Issue 39, build 2: a seat's grant is renewed by the node acting for the
// seat alone. Node a, which the seat left, keeps running, and its copy of
// the grant comes due with b's: were both to renew it, the provider
// (which rotates refresh tokens) would refuse one of them the token the
// other spent, and the grant would end for the seat. b renews it twice,
// a refusal is never seen, and alice's calls on b carry her token.
func TestFleetRenewsAGrantOnlyWhereTheSeatIs(t *testing.T) {
	prov, c := fleetGrantCompany(t)
	env := map[string]string{"ADA_TOKEN": "ada-token-123456", "GH_CLIENT_SECRET": grantClientSecret}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev := logEvents{ch: make(chan slog.Record, 4096)}
	nodes := openFleetNodes(t, ctx, Options{Company: c, StartupWait: 10 * time.Second, Logger: slog.New(ev),
		Env:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Fleet: &Fleet{ManualSeats: true}}, func(*testNode) {})
	a, b := nodes[0], nodes[1]
	if err := a.hub.ClaimSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	// Tokens live 3 s: each copy of the grant comes due every 2.4 s.
	prov.SetLifetime(3 * time.Second)
	grantThrough(t, ctx, prov, a)
	if err := a.hub.ReleaseSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.hub.ClaimSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	b.hub.servers.awaitSeatStarted(ctx, "alice")
	renewed := 0
	deadline := time.After(20 * time.Second)
	for renewed < 2 {
		select {
		case r := <-ev.ch:
			attrs := map[string]bool{}
			r.Attrs(func(at slog.Attr) bool { attrs[at.String()] = true; return true })
			switch {
			case r.Message == "oauth_refresh_refused":
				t.Fatalf("a renewal was refused: %v", attrs)
			case r.Message == "oauth_token_refreshed" && attrs["node=b"]:
				renewed++
			}
		case <-deadline:
			t.Fatalf("node b renewed alice's grant %d times in 20 s", renewed)
		}
	}
	if res := seatCall(t, b.hub, "alice", "whoami"); res.IsError || textOf(res) != "subject=u-alice-gh" {
		t.Fatalf("alice's call on node b answered %q (error %v)", textOf(res), res.IsError)
	}
}

// fleetGrantCompany starts a provider with alice's account at it and an
// auth: oauth server it protects, and a company whose seat alice runs a
// child of that server.
func fleetGrantCompany(t *testing.T) (*idp.Provider, *config.Company) {
	t.Helper()
	prov := idp.Start(t, "crewlet-upstream", idp.User{Subject: "u-alice-gh", Username: "alice-gh", Password: "pw-alice", Email: "alice@example.com"})
	serverURL := prov.ProtectedServer(t, grantClientID)
	return prov, grantCompany(t, serverURL)
}

// grantThrough authorizes gh for alice through node n's screen, the node
// holding her seat, and waits for her child there to answer as her.
func grantThrough(t *testing.T, ctx context.Context, prov *idp.Provider, n *testNode) *httptest.Server {
	t.Helper()
	web := httptest.NewServer(n.hub.Handler())
	t.Cleanup(web.Close)
	prov.AddWebClient(grantClientID, grantClientSecret, web.URL+"/settings/mcp-tools/oauth/callback")

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp := signInAtProvider(t, browser, authorizeLink(t, browser, web.URL, "alice"), prov.Issuer, "alice-gh", "pw-alice")
	body := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Query().Get("granted") != "alice" {
		t.Fatalf("the grant ended at %s (%s):\n%s", resp.Request.URL, resp.Status, body)
	}
	n.hub.servers.awaitSeatStarted(ctx, "alice")
	if res := seatCall(t, n.hub, "alice", "whoami"); res.IsError || textOf(res) != "subject=u-alice-gh" {
		t.Fatalf("alice's call on node %s answered %q (error %v)", n.name, textOf(res), res.IsError)
	}
	return web
}

// Issue 39, build 2: behind a balancer, the person authorizing a seat is
// sent back by the provider to whichever node the balancer picks. Here
// the authorization begins on the node holding alice and the provider's
// answer reaches the other: that node finds the authorization under way
// (the fleet's), makes the grant, and tells the holder, whose child of gh
// starts by itself and answers as alice.
func TestFleetGrantAnsweredOnAnotherNode(t *testing.T) {
	prov, c := fleetGrantCompany(t)
	env := map[string]string{"ADA_TOKEN": "ada-token-123456", "GH_CLIENT_SECRET": grantClientSecret}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, err := state.OpenJetStream(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.Close() })
	signIns, err := js.TTLBucket(ctx, "TEST_SCREEN_SESSIONS")
	if err != nil {
		t.Fatal(err)
	}
	nodes := openFleetNodes(t, ctx, Options{Company: c, StartupWait: 10 * time.Second, ScreenSessions: bucketSessions{signIns},
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}, func(*testNode) {})
	holder, other := placedOn(t, nodes, "alice")
	// The balancer: the provider's answer goes to the node not holding
	// alice, everything else to her holder.
	toHolder, toOther := holder.hub.Handler(), other.hub.Handler()
	var answered atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/settings/mcp-tools/oauth/callback" {
			answered.Add(1)
			toOther.ServeHTTP(w, r)
			return
		}
		toHolder.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	prov.AddWebClient(grantClientID, grantClientSecret, front.URL+"/settings/mcp-tools/oauth/callback")

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp := signInAtProvider(t, browser, authorizeLink(t, browser, front.URL, "alice"), prov.Issuer, "alice-gh", "pw-alice")
	body := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Query().Get("granted") != "alice" || answered.Load() == 0 {
		t.Fatalf("the grant answered on node %s ended at %s (%s):\n%s", other.name, resp.Request.URL, resp.Status, body)
	}
	holder.hub.servers.awaitSeatStarted(ctx, "alice")
	eventually(t, 10*time.Second, "gh running for alice on node "+holder.name, func() (bool, string) {
		st, why := rowState(holder.hub, "gh")
		return st == rowRunning, st + ": " + why
	})
	if res := seatCall(t, holder.hub, "alice", "whoami"); res.IsError || textOf(res) != "subject=u-alice-gh" {
		t.Fatalf("alice's call on node %s answered %q (error %v)", holder.name, textOf(res), res.IsError)
	}
}

// bucketSessions keeps the screen's sign-ins in a bucket every node
// reads, as a fleet's nodes keep them (serve's screen sessions).
type bucketSessions struct{ b *state.TTLBucket }

func (s bucketSessions) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.b.Put(ctx, key, value, ttl)
}

func (s bucketSessions) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.b.Get(ctx, key)
	if errors.Is(err, state.ErrNoKey) {
		return nil, screen.ErrNoSession
	}
	return e.Value, err
}

func (s bucketSessions) Delete(ctx context.Context, key string) error {
	e, err := s.b.Get(ctx, key)
	if err == nil {
		err = s.b.Delete(ctx, key, e.Revision)
	}
	if errors.Is(err, state.ErrNoKey) || errors.Is(err, state.ErrKeyMoved) {
		return nil
	}
	return err
}
