package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/hubtest/idp"
)

// oauthCompany is the embedded company's shape with the company's identity
// provider named and the administrator known there as u-admin.
func oauthCompany(issuer string) string {
	return fmt.Sprintf(`units:
  - id: core
    name: Core team
    lead: admin
    project: CORE
    space: CORE
    roles:
      - {name: Administrator, handle: admin, kind: human, admin: true, oidc_subject: u-admin}
      - {name: Assistant, handle: assistant}
tracker: {backend: native}
knowledge: {backend: native}
api:
  auth:
    tokens:
      - {id: operator, token: "${CREWLET_OPERATOR_TOKEN}", seat: admin}
    oauth: {issuer: %q, required_scopes: [crewlet]}
`, issuer)
}

// Issue 26, OPS-4, against the built `crewlet serve`: with a real identity
// provider started by the test (zitadel's OpenID provider on loopback),
// `crewlet config check` takes the company and refuses a provider over
// plain HTTP elsewhere; the hub's 401 challenge and metadata lead the
// go-sdk client to the provider, which signs the administrator in by the
// authorization code grant with PKCE; a page written with that token names
// the seat and the credential oidc:u-admin; a token for another resource is
// refused with invalid_token.
func TestOAuthSignInThroughTheBinary(t *testing.T) {
	p := idp.Start(t, "", idp.User{Subject: "u-admin", Username: "admin", Password: "admin-pw", Email: "admin@example.com"})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "company.yaml")
	if err := os.WriteFile(cfg, []byte(oauthCompany(p.Issuer)), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(oauthCompany("http://login.example.com")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(crewletBinary(t), "config", "check", cfg).CombinedOutput(); err != nil {
		t.Fatalf("config check of the company: %v\n%s", err, out)
	}
	if out, err := exec.Command(crewletBinary(t), "config", "check", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "api.auth.oauth.issuer") {
		t.Fatalf("config check of a provider over plain HTTP elsewhere: %v\n%s", err, out)
	}

	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN=static-token-0123456789abcdef"}, "--config", cfg)
	p.SetAudience(h.mcpURL())

	resp, err := http.Post(h.mcpURL(), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode != http.StatusUnauthorized || len(cs) != 1 ||
		cs[0].Params["resource_metadata"] != h.baseURL()+"/.well-known/oauth-protected-resource/operator/mcp" {
		t.Fatalf("no credential: %s %+v", resp.Status, cs)
	}

	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: idp.IDEClientID},
		RedirectURL:              idp.RedirectURL,
		AuthorizationCodeFetcher: p.SignIn("admin", "admin-pw"),
		ScopeFilter:              func(s []string) []string { return append(s, "openid") },
	})
	if err != nil {
		t.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "0"}, nil).
		Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: h.mcpURL(), OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("signing in through the hub's metadata: %v", err)
	}
	defer session.Close()
	id := mustJSONField(t, callTool(t, session, "write_page", map[string]any{"title": "Signed in", "body": "By the provider."}), "id")
	res := callTool(t, session, "get_page", map[string]any{"id": id})
	var got struct {
		Page struct {
			History []struct {
				By         string `json:"by"`
				OperatorID string `json:"operator_id"`
			} `json:"history"`
		} `json:"page"`
	}
	if err := json.Unmarshal([]byte(hubtest.Text(res)), &got); err != nil || len(got.Page.History) != 1 ||
		got.Page.History[0].By != "admin" || got.Page.History[0].OperatorID != "oidc:u-admin" {
		t.Fatalf("the page written with the provider's token: %v %s", err, hubtest.Text(res))
	}

	p.SetAudience("https://elsewhere.example/mcp")
	other, err := p.UserToken(ctxT(t), "admin", "admin-pw", "openid", "crewlet")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, h.baseURL()+"/tools", nil)
	req.Header.Set("Authorization", "Bearer "+other)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs, _ = oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode != http.StatusUnauthorized || len(cs) != 1 || cs[0].Params["error"] != "invalid_token" {
		t.Fatalf("a token for another resource: %s %+v", resp.Status, cs)
	}
}
