package hub

import (
	"net"
	"net/http"
	"testing"

	"github.com/crewlet/hub/hub/throttle"
)

// Issue 26, item 3: wrong bearer tokens from one address are slowed once
// its bucket is spent, on /operator/mcp, /operator/act and the REST routes
// alike (one bucket for the source): answered 429 with Retry-After before
// the token is read. A request with no token is no guess (a client's first
// request finds the challenge that way), and the right token from another
// address is answered at once.
func TestWrongBearerTokensAreSlowedPerSource(t *testing.T) {
	th := newTestHub(t)
	send := func(c *http.Client, path, token string) *http.Response {
		t.Helper()
		method := "GET"
		if path == "/operator/act" || path == "/operator/mcp" {
			method = "POST"
		}
		req, _ := http.NewRequest(method, th.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 20 {
		if resp := send(http.DefaultClient, "/tools", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no token: %s", resp.Status)
		}
	}
	paths := []string{"/tools", "/operator/act", "/mcp-servers", "/operator/mcp"}
	for i := range throttle.DefaultBurst {
		if resp := send(http.DefaultClient, paths[i%len(paths)], "wrong-token-"+string(rune('a'+i))); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %s", i+1, resp.Status)
		}
	}
	resp := send(http.DefaultClient, "/tools", "wrong-token-z")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the bucket: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer other.CloseIdleConnections()
	if resp := send(other, "/tools", "ada-token-123456"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right token from another address: %s", resp.Status)
	}
}
