package hub

import (
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest/idp"
)

// Issue 36 (finding 10): an authorization started from the screen is
// completed by the person who started it, in the browser they started it
// in, and by nothing else. Against a real OpenID provider:
//   - two authorizations started in two tabs are both pending: the second
//     does not overwrite the first's nonce;
//   - a navigation to the callback naming no state, or a state no
//     authorization here started, clears neither;
//   - the answer brought back without the screen's session cookie (as a
//     browser sent back from another site sends none of a Strict cookie)
//     completes nothing; it is answered a page whose form brings it back
//     from the screen, and that form, sent with no session, is refused;
//     sent by the browser that started it, it completes the grant;
//   - the first tab's answer completes too.
func TestGrantCallbackIsTheStartersAlone(t *testing.T) {
	prov := idp.Start(t, "crewlet-upstream", idp.User{Subject: "u-alice-gh", Username: "alice-gh", Password: "pw-alice", Email: "alice@example.com"})
	serverURL := prov.ProtectedServer(t, grantClientID)
	_, web, ev := grantHub(t, serverURL)
	callback := web.URL + "/settings/mcp-tools/oauth/callback"
	prov.AddWebClient(grantClientID, grantClientSecret, callback)
	ev.await(t, 10*time.Second, "mcp_server_awaiting_credential", "server=gh", "seat=alice")

	jar, _ := cookiejar.New(nil)
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &http.Client{Jar: jar, CheckRedirect: noFollow}
	follow := &http.Client{Jar: jar}
	// Signed in once, each tab follows its own authorize link (read off
	// the server's page, fresh) to the provider's login form, and the
	// browser keeps each tab's nonce.
	authorizeLink(t, follow, web.URL, "alice")
	tab := func() (loginID string) {
		t.Helper()
		resp, err := follow.Get(pageAuthorizeLink(t, follow, web.URL, "alice"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Request.URL.Query().Get("authRequestID")
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("the authorize link led to %s (%s)", resp.Request.URL, resp.Status)
		}
		return id
	}
	first, second := tab(), tab()

	// Navigations to the callback that name no authorization started
	// here: refused, and neither tab's nonce is touched.
	for _, q := range []string{"", "?code=x", "?state=not-one-of-ours&code=x"} {
		resp, err := c.Get(callback + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("the callback%s answered %s", q, resp.Status)
		}
		for _, ck := range resp.Cookies() {
			if strings.HasPrefix(ck.Name, "crewlet_grant") {
				t.Fatalf("the callback%s cleared the cookie %s", q, ck.Name)
			}
		}
	}

	// The second tab's answer, brought back by a browser that has the
	// tab's nonce and the provider's cookies but not the screen's
	// session: nothing completes.
	apart, _ := cookiejar.New(nil)
	hub, _ := url.Parse(web.URL)
	for _, ck := range jar.Cookies(hub) {
		if ck.Name != "crewlet_session" {
			apart.SetCookies(hub, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}})
		}
	}
	stranger := &http.Client{Jar: apart, CheckRedirect: noFollow}
	answer := loginAnswer(t, stranger, prov.Issuer, second)
	resp, err := stranger.Get(answer)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="grant-finish"`) {
		t.Fatalf("the answer without the session: %s\n%s", resp.Status, page)
	}
	if ev.seen("oauth_grant_received") {
		t.Fatal("an answer brought back without the starter's session completed the grant")
	}
	u, _ := url.Parse(answer)
	form := url.Values{"state": {u.Query().Get("state")}, "code": {u.Query().Get("code")}}
	post := func(cl *http.Client) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, callback, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", web.URL)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(stranger); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the finishing form sent without the session: %s", resp.Status)
	}
	// Sent by the browser that started it, the same answer completes.
	if resp := post(c); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "granted=alice") {
		t.Fatalf("the finishing form sent by the starter: %s %s", resp.Status, resp.Header.Get("Location"))
	}
	ev.await(t, 10*time.Second, "oauth_grant_received", "server=gh", "seat=alice")

	// The first tab's answer, in the browser that started it, completes
	// as well: its nonce outlived the second tab and the stray callbacks.
	resp, err = c.Get(loginAnswer(t, c, prov.Issuer, first))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "granted=alice") {
		t.Fatalf("the first tab's answer: %s %s\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
}

// loginAnswer signs alice in at the provider for the login form id and
// answers where the provider sends the browser back: the hub's callback,
// with the state and code.
func loginAnswer(t *testing.T, c *http.Client, issuer, id string) string {
	t.Helper()
	resp, err := c.PostForm(issuer+"/login/username", url.Values{"id": {id}, "username": {"alice-gh"}, "password": {"pw-alice"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for hops := 0; resp.StatusCode/100 == 3 && hops < 10; hops++ {
		to, err := resp.Location()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(to.Path, "/oauth/callback") {
			return to.String()
		}
		if resp, err = c.Get(to.String()); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	t.Fatalf("the provider's login answered %s, not a way back to the callback", resp.Status)
	return ""
}

// seen reports whether a record with the message msg is among those
// logged so far, without waiting for more: for a line the request that
// would write it has already answered.
func (e logEvents) seen(msg string) bool {
	for {
		select {
		case r := <-e.ch:
			if r.Message == msg {
				return true
			}
		default:
			return false
		}
	}
}

// pageAuthorizeLink reads the authorize link the server's page offers for
// seat, to a browser already signed in.
func pageAuthorizeLink(t *testing.T, c *http.Client, web, seat string) string {
	t.Helper()
	resp, err := c.Get(web + "/settings/mcp-tools/servers/gh")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	resp.Body.Close()
	m := regexp.MustCompile(`href="(/settings/mcp-tools/servers/gh/authorize\?seat=` + seat + `[^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the server's page offers no authorize link for %s:\n%s", seat, body)
	}
	return web + html.UnescapeString(m[1])
}
