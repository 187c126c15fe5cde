package screen

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/throttle"
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

// serveFrozen serves the screen with a wrong-token counter whose clock
// never moves, so its buckets are spent by counts alone.
func serveFrozen(t *testing.T) *served {
	t.Helper()
	at := time.Unix(1_700_000_000, 0)
	return serveWith(t, Options{Wrong: throttle.NewCredentials(func() time.Time { return at })})
}

// Issue 36 finding 2: the sign-in slows failures, not callers. From one
// address, a stale token sent more times than its bucket holds is answered
// 401 then 429, while the right token, sent between them from the same
// address, signs in every time.
func TestSignInStaleTokenNeverLocksOutTheRightOne(t *testing.T) {
	s := serveFrozen(t)
	for i := range 3 * throttle.CredentialBurst {
		resp, body := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"stale"}})
		want := http.StatusUnauthorized
		if i >= throttle.CredentialBurst {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("stale try %d: %s %q", i+1, resp.Status, body)
		}
		resp, _ = s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"admin-token"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Base {
			t.Fatalf("the right token after stale try %d: %s to %q", i+1, resp.Status, resp.Header.Get("Location"))
		}
	}
}

// Issue 36 finding 2: a wrong token past its own bucket is answered 429
// with Retry-After and words; the frozen clock makes the wait the whole
// refill.
func TestSignInWrongTokenPastItsBucket(t *testing.T) {
	s := serveFrozen(t)
	for i := range throttle.CredentialBurst {
		if resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"guess"}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong try %d: %s", i+1, resp.Status)
		}
	}
	resp, body := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"guess"}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" ||
		!strings.Contains(body, "too many wrong tokens came from this address") || !strings.Contains(body, "wait 3 s") {
		t.Fatalf("past the bucket: %s Retry-After %q\n%s", resp.Status, resp.Header.Get("Retry-After"), body)
	}
}

// Issue 36 finding 2: a source that tries one token after another meets
// the per-source ceiling — SourceCeiling wrong tokens, then 429 with
// Retry-After — and still signs in with the right token.
func TestSignInSourcePastTheCeiling(t *testing.T) {
	s := serveFrozen(t)
	for i := range throttle.SourceCeiling {
		if resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {fmt.Sprint("guess-", i)}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("distinct wrong token %d: %s", i+1, resp.Status)
		}
	}
	resp, body := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"guess-fresh"}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "wait 2 s") {
		t.Fatalf("past the ceiling: %s Retry-After %q\n%s", resp.Status, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"admin-token"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the right token from the source past its ceiling: %s", resp.Status)
	}
}
