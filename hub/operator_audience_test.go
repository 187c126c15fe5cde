package hub

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// getAs sends a request naming host in its Host header, to the hub at
// r.url, and answers the status, the challenge and the body.
func (r *oauthRig) getAs(t *testing.T, host, path, token string) (int, map[string]string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.url+path, nil)
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		t.Fatalf("the challenge %q does not parse: %v", resp.Header.Values("WWW-Authenticate"), err)
	}
	var p map[string]string
	for _, c := range cs {
		if c.Scheme == "bearer" {
			p = c.Params
		}
	}
	return resp.StatusCode, p, string(body)
}

// Issue 36, finding 1 (OPS-1): the hub's resource identity is the address
// it listens on, never the Host a request names. A token the configured
// issuer minted for another service on this machine, sent with that
// service's address as the Host, is refused; the protected-resource
// document and the challenge name the hub's own URL whatever the Host.
func TestOAuthAudienceIsNotTheHostHeader(t *testing.T) {
	r := newOAuthRig(t)
	ctx := context.Background()
	_, port, _ := strings.Cut(strings.TrimPrefix(r.url, "http://"), ":")
	for _, host := range []string{"localhost:3000", "localhost", "[::1]:" + port, "127.0.0.1:abc"} {
		t.Run(host, func(t *testing.T) {
			r.idp.SetAudience("http://" + host + "/operator/mcp")
			tok, err := r.idp.ServiceToken(ctx, "crewlet")
			if err != nil {
				t.Fatal(err)
			}
			status, p, body := r.getAs(t, host, "/tools", tok)
			if status != http.StatusUnauthorized || !strings.Contains(body, "not for this hub") || p["resource_metadata"] != r.url+"/.well-known/oauth-protected-resource" {
				t.Fatalf("a token for http://%s sent with that Host: %d %v %q", host, status, p, body)
			}
			status, _, body = r.getAs(t, host, "/.well-known/oauth-protected-resource/operator/mcp", "")
			if status != http.StatusOK || !strings.Contains(body, `"resource":"`+r.url+`/operator/mcp"`) {
				t.Fatalf("the metadata asked with Host %s: %d %s", host, status, body)
			}
		})
	}
	r.idp.SetAudience(r.url + "/operator/mcp")
	tok, err := r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.getAs(t, "localhost:3000", "/tools", tok); status != http.StatusOK {
		t.Fatalf("a token for the hub's own address: %d %s", status, body)
	}
}

// Issue 36, finding 1: with api.public_url set, that URL is the resource:
// a token issued for it is taken though the request reached the hub at its
// loopback address, one issued for the listen address no longer is, and
// the document and the challenge name the public URL.
func TestOAuthAudienceFromPublicURL(t *testing.T) {
	const public = "https://hub.example.com"
	r := newOAuthRig(t, public)
	ctx := context.Background()
	r.idp.SetAudience(public + "/operator/mcp")
	tok, err := r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(r.url, "http://")
	if status, _, body := r.getAs(t, host, "/tools", tok); status != http.StatusOK {
		t.Fatalf("a token for the public URL: %d %s", status, body)
	}
	r.idp.SetAudience(r.url + "/operator/mcp")
	tok, err = r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	status, p, body := r.getAs(t, host, "/operator/mcp", tok)
	if status != http.StatusUnauthorized || !strings.Contains(body, "not for this hub") ||
		p["resource_metadata"] != public+"/.well-known/oauth-protected-resource/operator/mcp" {
		t.Fatalf("a token for the listen address beside a public URL: %d %v %q", status, p, body)
	}
	status, _, body = r.getAs(t, host, "/.well-known/oauth-protected-resource/operator/mcp", "")
	if status != http.StatusOK || !strings.Contains(body, `"resource":"`+public+`/operator/mcp"`) {
		t.Fatalf("the metadata: %d %s", status, body)
	}
	// A proxy in front passes the public name as the Host: the hub was
	// told that name, so the rebinding guard lets it through.
	r.idp.SetAudience(public + "/operator/mcp")
	tok, err = r.idp.ServiceToken(ctx, "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.getAs(t, "hub.example.com", "/tools", tok); status != http.StatusOK {
		t.Fatalf("Host hub.example.com with it as the public URL: %d %s", status, body)
	}
	if status, _, _ := r.getAs(t, "other.example.com", "/tools", tok); status != http.StatusForbidden {
		t.Fatalf("Host other.example.com: %d, want the guard's 403", status)
	}
}
