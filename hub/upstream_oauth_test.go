package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest/idp"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	grantClientID     = "crewlet-hub"
	grantClientSecret = "hub-client-secret-0123"
)

// grantCompany is a company whose seat alice has a child of the auth:
// oauth server at serverURL, and ada, an administrator, to authorize it.
func grantCompany(t *testing.T, serverURL string) *config.Company {
	t.Helper()
	c, err := config.Parse(fmt.Appendf(nil, `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice, mcp_env: {gh: {}}}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - name: gh
    shared: false
    trust: auto
    url: %q
    auth: oauth
    oauth: {client_id: %s, client_secret: "${GH_CLIENT_SECRET}", scopes: [openid, offline_access]}
`, serverURL, grantClientID))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grantHub runs a hub of grantCompany, served over loopback HTTP, its log
// records sent to the events.
func grantHub(t *testing.T, serverURL string) (*Hub, *httptest.Server, logEvents) {
	t.Helper()
	c := grantCompany(t, serverURL)
	vault, err := secrets.OpenGrants(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ADA_TOKEN": "ada-token-123456", "GH_CLIENT_SECRET": grantClientSecret}
	ev := logEvents{ch: make(chan slog.Record, 4096)}
	h, err := New(context.Background(), Options{Company: c, StartupWait: 10 * time.Second, Logger: slog.New(ev), Grants: vault,
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	web := httptest.NewServer(h.Handler())
	t.Cleanup(web.Close)
	return h, web, ev
}

// authorizeLink signs in to the screen as ada and reads the authorize link
// the server's page offers for seat.
func authorizeLink(t *testing.T, c *http.Client, web, seat string) string {
	t.Helper()
	resp, err := c.PostForm(web+"/settings/mcp-tools/sign-in", url.Values{"token": {"ada-token-123456"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return pageAuthorizeLink(t, c, web, seat)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// signInAtProvider follows the authorize link to the provider's login form,
// fills it in, and follows the answer back to the hub's callback.
func signInAtProvider(t *testing.T, c *http.Client, link, issuer, user, pass string) *http.Response {
	t.Helper()
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("the authorize link led to %s (%s), not to the provider's login form", resp.Request.URL, resp.Status)
	}
	resp, err = c.PostForm(issuer+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {pass}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func seatCall(t *testing.T, h *Hub, seat, tool string) *mcp.CallToolResult {
	t.Helper()
	caller := authority.Caller{Seat: seat, Kind: authority.KindAgent, Requester: "ada", TurnKey: "t-" + tool}
	return h.Router().Call(t.Context(), h.SeatRegistry(seat).Freeze(), caller, tool, []byte(`{}`))
}

func rowState(h *Hub, server string) (string, string) {
	for _, r := range h.serverRows() {
		if r.Name == server {
			return r.State, r.Reason
		}
	}
	return "", ""
}

// Issue 26 item 2 (CFG-3, MCP-11, MCP-12, FLT-5): a seat's child of an
// auth: oauth server waits for the seat's grant (Waiting for credentials,
// mcp_server_awaiting_credential); an administrator's authorization
// through the screen's link and the provider's login form starts it by
// itself, and its calls carry that seat's own token (the server sees the
// person's subject), renewed before it lapses; a refresh the provider
// refuses holds it back as Failing with mcp_server_failed.
func TestSeatOAuthGrant(t *testing.T) {
	prov := idp.Start(t, "crewlet-upstream", idp.User{Subject: "u-alice-gh", Username: "alice-gh", Password: "pw-alice", Email: "alice@example.com"})
	serverURL := prov.ProtectedServer(t, grantClientID)
	h, web, ev := grantHub(t, serverURL)
	prov.AddWebClient(grantClientID, grantClientSecret, web.URL+"/settings/mcp-tools/oauth/callback")

	ev.await(t, 10*time.Second, "mcp_server_awaiting_credential", "server=gh", "seat=alice")
	if st, why := rowState(h, "gh"); st != rowWaiting || !strings.Contains(why, "alice") {
		t.Fatalf("before the grant, gh reads %q (%s), want %q naming alice", st, why, rowWaiting)
	}
	if h.servers.instanceOf("gh@alice") != nil {
		t.Fatal("alice's child was started without her grant")
	}

	// Tokens live 3 s from now: the grant's token is renewed ahead of
	// that, so a call after it lapsed still goes through.
	prov.SetLifetime(3 * time.Second)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	link := authorizeLink(t, c, web.URL, "alice")

	// The answer brought back by another browser (no nonce, no session)
	// grants nothing, and is not used up by trying.
	stranger := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := stranger.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "sign-in") {
		t.Fatalf("the authorize link without a session answered %s %s", resp.Status, resp.Header.Get("Location"))
	}

	resp = signInAtProvider(t, c, link, prov.Issuer, "alice-gh", "pw-alice")
	body := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/settings/mcp-tools/servers/gh" || resp.Request.URL.Query().Get("granted") != "alice" {
		t.Fatalf("the grant ended at %s (%s):\n%s", resp.Request.URL, resp.Status, body)
	}
	ev.await(t, 10*time.Second, "oauth_grant_received", "server=gh", "seat=alice")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	h.servers.awaitSeatStarted(ctx, "alice")
	if st, why := rowState(h, "gh"); st != rowRunning {
		t.Fatalf("after the grant, gh reads %q (%s), want Running", st, why)
	}
	res := seatCall(t, h, "alice", "whoami")
	if got := textOf(res); res.IsError || got != "subject=u-alice-gh" {
		t.Fatalf("alice's call carried %q (error %v), want her own subject", got, res.IsError)
	}

	// Two renewals: the first token has lapsed by the second, and the
	// call still carries a good token of alice's.
	ev.await(t, 10*time.Second, "oauth_token_refreshed", "server=gh", "seat=alice")
	ev.await(t, 10*time.Second, "oauth_token_refreshed", "server=gh", "seat=alice")
	if res := seatCall(t, h, "alice", "whoami"); res.IsError || textOf(res) != "subject=u-alice-gh" {
		t.Fatalf("after renewal alice's call answered %q (error %v)", textOf(res), res.IsError)
	}

	// The provider ends alice's sessions: the next renewal is refused,
	// and her child is held back as Failing, saying so.
	if err := prov.EndSessions(t.Context(), "u-alice-gh", grantClientID); err != nil {
		t.Fatal(err)
	}
	ev.await(t, 10*time.Second, "mcp_server_failed", "server=gh", "seat=alice")
	if st, why := rowState(h, "gh"); st != rowFailing || !strings.Contains(why, "refused to renew") {
		t.Fatalf("after a refused renewal gh reads %q (%s), want Failing saying the renewal was refused", st, why)
	}
	if h.servers.instanceOf("gh@alice") != nil {
		t.Fatal("alice's child still runs on a grant that was refused")
	}
	if res := seatCall(t, h, "alice", "whoami"); !res.IsError {
		t.Fatalf("a call after the refusal answered %q", textOf(res))
	} else if cl, _ := servers.ClassOf(res); cl == "" {
		t.Fatalf("a call after the refusal is refused without a class: %q", textOf(res))
	}
}
