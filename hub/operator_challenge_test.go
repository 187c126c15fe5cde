package hub

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Issue 40 item 4 (OPS-1): a hub with no identity provider does not invite
// an OAuth sign-in. A wrong static token is answered 401 with a challenge
// that names no metadata document, no scope and no OAuth error, and the
// reason in words in the body; the protected-resource documents answer
// 404 saying the hub's credentials are the company file's tokens. With a
// provider configured, the challenge keeps pointing at the document.
func TestChallengeInvitesOAuthOnlyWhenConfigured(t *testing.T) {
	th := newTestHub(t)
	req, _ := http.NewRequest(http.MethodPost, th.url+"/operator/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer not-a-current-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 {
		t.Fatalf("the challenge %q: %v", resp.Header.Values("WWW-Authenticate"), err)
	}
	if resp.StatusCode != http.StatusUnauthorized || cs[0].Scheme != "bearer" || len(cs[0].Params) != 1 || cs[0].Params["realm"] != "crewlet" ||
		string(body) != "Unauthorized: unknown or revoked token\n" {
		t.Fatalf("a wrong static token without a provider: %d %+v %q", resp.StatusCode, cs, body)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/operator/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(th.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "its operator credentials are the company file's tokens") {
			t.Fatalf("%s without a provider: %d %q", path, resp.StatusCode, body)
		}
	}

	r := newOAuthRig(t)
	status, cs, body2 := r.get(t, http.MethodPost, "/operator/mcp", oauthAdminToken+"-wrong")
	p := bearerParams(t, cs)
	if status != http.StatusUnauthorized || p["resource_metadata"] != r.url+"/.well-known/oauth-protected-resource/operator/mcp" ||
		p["error"] != "invalid_token" || !strings.HasPrefix(body2, "Unauthorized: ") {
		t.Fatalf("a wrong token with a provider: %d %+v %q", status, p, body2)
	}
}
