package screen

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 26, item 3: the cookie holds a session id, not the token; after
// sign-out the same cookie, sent again, opens nothing, for a page as for
// a form carrying its old CSRF token.
func TestSignOutEndsTheSessionItsCookieNamed(t *testing.T) {
	s := serve(t)
	csrf := s.signIn(t, "admin-token")
	base, _ := url.Parse(s.url + Base)
	cookies := s.client.Jar.Cookies(base)
	if len(cookies) != 1 || cookies[0].Name != cookieName || strings.Contains(cookies[0].Value, "admin-token") {
		t.Fatalf("cookies %+v", cookies)
	}
	old := cookies[0].Value
	if p, ok := s.current(context.Background(), old); !ok || p.TokenID != "laptop" {
		t.Fatalf("the session before sign-out: %+v %v", p, ok)
	}
	resp, _ := s.do(t, "POST", Base+"/sign-out", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %s", resp.Status)
	}
	// The browser dropped the cookie; a copy of it is sent back by hand.
	replay := func(method, path string, form url.Values) *http.Response {
		var body *strings.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, s.url+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: cookieName, Value: old})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := replay("GET", Base, nil); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != Base+"/sign-in?ended=1" {
		t.Fatalf("the old cookie on a page: %s to %q", r.Status, r.Header.Get("Location"))
	}
	if r := replay("POST", Base+"/servers", url.Values{"csrf": {csrf}, "name": {"x"}, "command": {"/bin/true"}}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the old cookie and CSRF token on a form: %s", r.Status)
	}
	if len(s.added) != 0 {
		t.Fatal("a form sent with a signed-out session's cookie was written")
	}
}

// Issue 26, item 3: wrong tokens from one address are slowed once its
// bucket is spent — answered 429 with Retry-After before the token is
// read — while the right token from another address signs in at once.
func TestWrongTokensAreSlowedPerSource(t *testing.T) {
	s := serve(t)
	for i := range 10 {
		if resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"guess"}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong try %d: %s", i+1, resp.Status)
		}
	}
	resp, body := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"guess"}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many wrong tokens") {
		t.Fatalf("past the bucket: %s %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	// The same source's right token waits its turn too: the token is not
	// read while the source is slowed.
	if resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"admin-token"}}); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token from the slowed source: %s", resp.Status)
	}
	// Another source is not slowed by it: the right token from another
	// loopback address signs in at once.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer other.CloseIdleConnections()
	resp, err := other.PostForm(s.url+Base+"/sign-in", url.Values{"token": {"admin-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the right token from another address: %s", resp.Status)
	}
}
