package serve

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// Issue 36 (finding 10): a page of the screen drawn before the hub
// restarted still posts: its CSRF token is as durable as the sign-in it
// belongs to, which the node keeps on disk, so the form drawn before the
// restart is taken by the hub reopened on the same data directory (a key
// drawn per process answered it 403).
func TestScreenFormDrawnBeforeARestartPostsAfterIt(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) (string, bool) { return limitsToken, k == "CREWLET_OPERATOR_TOKEN" }
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(base, method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", base)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	base, _, stop := runUntilListening(t, Options{DataDir: dir, LookupEnv: env})
	if resp, _ := send(base, "POST", "/settings/mcp-tools/sign-in", url.Values{"token": {limitsToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %s", resp.Status)
	}
	_, page := send(base, "GET", "/settings/mcp-tools", nil)
	_, after, ok := strings.Cut(page, `data-csrf="`)
	if !ok {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	csrf, _, _ := strings.Cut(after, `"`)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	base2, _, stop2 := runUntilListening(t, Options{DataDir: dir, LookupEnv: env})
	defer func() {
		if err := stop2(); err != nil {
			t.Error(err)
		}
	}()
	// The cookie jar keeps cookies by host; the port moved with the
	// restart, so the session cookie is carried over by hand.
	u1, _ := url.Parse(base)
	u2, _ := url.Parse(base2)
	jar.SetCookies(u2, jar.Cookies(u1))
	resp, body := send(base2, "POST", "/settings/mcp-tools/sign-out", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form drawn before the restart, posted after it: %s\n%s", resp.Status, body)
	}
}
