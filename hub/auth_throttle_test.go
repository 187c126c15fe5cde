package hub

import (
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/hub/throttle"
)

// sendFrom sends a request with token (none if empty) from the loopback
// address ip, and answers the status, Retry-After and the body.
func sendFrom(t *testing.T, ip net.IP, url, path, token string) (int, string, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
	defer c.CloseIdleConnections()
	method := "GET"
	if path == "/operator/act" || path == "/operator/mcp" {
		method = "POST"
	}
	req, _ := http.NewRequest(method, url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// Issue 36 finding 2 (OPS-1): the throttle slows failures, not callers. A
// client that keeps sending a stale token from an address is answered 429
// once that token's bucket is spent, while a client with the right token
// on the same address is answered at once every time, however many stale
// requests came between; a request with no token is no guess. The
// throttle's clock stands still, so the counts alone decide.
func TestStaleTokenNeverLocksOutTheRightOne(t *testing.T) {
	th := newTestHub(t)
	now := time.Unix(1_700_000_000, 0)
	th.operator.wrong = throttle.NewCredentials(func() time.Time { return now })
	local := net.IPv4(127, 0, 0, 1)
	for range 20 {
		if status, _, _ := sendFrom(t, local, th.url, "/tools", ""); status != http.StatusUnauthorized {
			t.Fatalf("no token: %d", status)
		}
	}
	paths := []string{"/tools", "/operator/act", "/mcp-servers", "/operator/mcp"}
	for i := range 3 * throttle.CredentialBurst {
		path := paths[i%len(paths)]
		status, retry, body := sendFrom(t, local, th.url, path, "stale-token-0000")
		switch {
		case i < throttle.CredentialBurst && status != http.StatusUnauthorized:
			t.Fatalf("stale request %d on %s: %d %s, want 401 within its bucket", i+1, path, status, body)
		case i >= throttle.CredentialBurst && (status != http.StatusTooManyRequests || retry != "3" ||
			!strings.Contains(body, "unknown or revoked token, and too many wrong credentials came from this address")):
			t.Fatalf("stale request %d on %s past its bucket: %d Retry-After %q %s", i+1, path, status, retry, body)
		}
		if status, _, body := sendFrom(t, local, th.url, "/tools", "ada-token-123456"); status != http.StatusOK {
			t.Fatalf("the right token on the same address after stale request %d: %d %s", i+1, status, body)
		}
	}
}

// Issue 36 finding 2: a source that tries one credential after another
// meets the per-source ceiling: its wrong credentials are answered 429,
// while its right one still passes, and another address is not slowed.
func TestWrongCredentialsMeetTheSourceCeiling(t *testing.T) {
	th := newTestHub(t)
	now := time.Unix(1_700_000_000, 0)
	th.operator.wrong = throttle.NewCredentials(func() time.Time { return now })
	guesser := net.IPv4(127, 0, 0, 2)
	for i := range throttle.SourceCeiling {
		if status, _, body := sendFrom(t, guesser, th.url, "/tools", fmt.Sprintf("guess-%04d", i)); status != http.StatusUnauthorized {
			t.Fatalf("guess %d below the ceiling: %d %s", i+1, status, body)
		}
	}
	status, retry, body := sendFrom(t, guesser, th.url, "/tools", "guess-last")
	if status != http.StatusTooManyRequests || retry != "2" || !strings.Contains(body, "too many wrong credentials came from this address") {
		t.Fatalf("past the ceiling: %d Retry-After %q %s", status, retry, body)
	}
	if status, _, body := sendFrom(t, guesser, th.url, "/tools", "ada-token-123456"); status != http.StatusOK {
		t.Fatalf("the right token from the guesser's address: %d %s", status, body)
	}
	if status, _, body := sendFrom(t, net.IPv4(127, 0, 0, 3), th.url, "/tools", "guess-last"); status != http.StatusUnauthorized {
		t.Fatalf("a wrong token from another address: %d %s", status, body)
	}
}

// Issue 36 finding 2: the API and the screen's sign-in count wrong tokens
// with one counter, so a guesser alternating the two surfaces gets no
// more tries than on one: a stale token sent to each in turn is answered
// 429 on both once its one bucket is spent, and the right token still
// signs in to the screen from the same address.
func TestAPIAndSignInShareOneCounter(t *testing.T) {
	th := newTestHub(t)
	now := time.Unix(1_700_000_000, 0)
	// The screen holds the operator's counter itself, so its clock is
	// stopped in place rather than the counter replaced.
	*th.operator.wrong = *throttle.NewCredentials(func() time.Time { return now })
	signIn := func(token string) (int, string, string) {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		defer c.CloseIdleConnections()
		resp, err := c.PostForm(th.url+screen.Base+"/sign-in", neturl.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
	}
	local := net.IPv4(127, 0, 0, 1)
	for i := range 2 * throttle.CredentialBurst {
		var status int
		var retry, body, surface string
		if i%2 == 0 {
			surface = "API"
			status, retry, body = sendFrom(t, local, th.url, "/tools", "stale-token-0000")
		} else {
			surface = "sign-in"
			status, retry, body = signIn("stale-token-0000")
		}
		want := http.StatusUnauthorized
		if i >= throttle.CredentialBurst {
			want = http.StatusTooManyRequests
		}
		if status != want || (want == http.StatusTooManyRequests && retry != "3") {
			t.Fatalf("stale try %d at the %s: %d Retry-After %q, want %d\n%s", i+1, surface, status, retry, want, body)
		}
	}
	if status, _, body := signIn("ada-token-123456"); status != http.StatusSeeOther {
		t.Fatalf("the right token at the sign-in: %d\n%s", status, body)
	}
}
