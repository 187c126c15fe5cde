package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/hub/hubtest/idp"
)

// grantCompany runs the seat alice on the fake model, with her own child
// of a remote server that signs its users in through the company's
// provider (auth: oauth), and ada, an administrator, to authorize it.
const grantCompany = `
providers:
  fake: {api: openai, base_url: "{{BASE}}", api_key: "${E2E_MODEL_KEY}"}
models:
  default: {provider: fake, model: e2e-model}
units:
  - id: core
    name: Core
    lead: ada
    project: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice, mcp_env: {gh: {}}}
api:
  auth:
    tokens:
      - {id: ada, token: "${E2E_TOKEN}", seat: ada}
mcp_servers:
  - name: gh
    shared: false
    trust: auto
    url: "{{SERVER}}"
    auth: oauth
    oauth: {client_id: {{CLIENT}}, client_secret: "${E2E_GH_CLIENT_SECRET}", scopes: [openid, offline_access]}
`

// The hub's client at the provider, for the tests' auth: oauth server.
const clientID, clientSecret = "crewlet-hub-e2e", "e2e-hub-client-secret-0123"

// startGrantRig starts a real OpenID provider with alice's account, the
// MCP server it protects, and the stand-in model, whose turns call whoami
// in their first round and end in the next; it answers them, and
// grantCompany naming them.
func startGrantRig(t *testing.T) (*idp.Provider, *modeltest.Server, string) {
	t.Helper()
	prov := idp.Start(t, "crewlet-upstream", idp.User{Subject: "u-alice-gh", Username: "alice-gh", Password: "pw-alice", Email: "alice@example.com"})
	server := prov.ProtectedServer(t, clientID)
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "whoami", Args: map[string]any{}}}}
		}
		return modeltest.Reply{Text: "Done."}
	})
	doc := strings.NewReplacer("{{BASE}}", model.OpenAIBase(), "{{SERVER}}", server, "{{CLIENT}}", clientID).Replace(grantCompany)
	return prov, model, doc
}

// Issue 26, Done-when (item 2; CFG-3, MCP-11, MCP-12, FLT-5): a go-sdk MCP
// server protected by a real OpenID provider is configured auth: oauth for
// the seat alice. Against the built hub: her child reads Waiting for
// credentials; an administrator completes the grant through the screen's
// link in Chromium, signing in at the provider's own login form; the child
// becomes Running by itself, and alice's turn calls the server with her own
// token (the server answers her subject there); when the provider refuses
// the next renewal, the child is Failing, with the event.
func TestSeatGrantThroughTheScreen(t *testing.T) {
	prov, model, doc := startGrantRig(t)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHubIn(t, t.TempDir(), []string{"E2E_TOKEN=" + e2eToken, "E2E_MODEL_KEY=sk-e2e-model-key",
		"E2E_GH_CLIENT_SECRET=" + clientSecret}, "--config", cfg)
	base := h.baseURL() + "/settings/mcp-tools"
	prov.AddWebClient(clientID, clientSecret, base+"/oauth/callback")
	waitLog(t, h, 30*time.Second, "mcp_server_awaiting_credential", `"server":"gh"`, `"seat":"alice"`)

	b := newBrowser(t)
	b.do("sign in", chromedp.Navigate(base), chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#token"), e2eToken), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css(`tr[data-server="gh"][data-state="Waiting for credentials"]`)))
	b.do("open gh's page", chromedp.Navigate(base+"/servers/gh"),
		chromedp.WaitVisible(css(`#grants tr[data-seat="alice"] a.authorize`)))
	b.shot("grant-01-waiting")

	// Tokens live 3 s from now: the grant's token is renewed ahead of
	// that, which the refusal below needs.
	prov.SetLifetime(3 * time.Second)
	b.do("authorize for alice", chromedp.Click(css(`#grants tr[data-seat="alice"] a.authorize`)),
		chromedp.WaitVisible(css("#username")))
	b.shot("grant-02-provider-login")
	b.do("sign in at the provider", chromedp.SendKeys(css("#username"), "alice-gh"), chromedp.SendKeys(css("#password"), "pw-alice"),
		chromedp.Submit(css("#password")))
	// The provider sends the browser back to the hub's callback, which
	// seals the grant and sends it on to gh's page; the page follows the
	// child's start live.
	// Its redirects may land while a query runs ("target navigated"):
	// such a query is asked again, on the page it lands on.
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := chromedp.Do(ctx, waitFor(`location.pathname === "/settings/mcp-tools/servers/gh" && document.querySelector('#server-state[data-state="Running"]') !== null`))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.shot("failed-back-on-gh")
			t.Fatalf("back on gh's page, Running: %v\npage text:\n%s", err, b.text("body"))
		}
	}
	b.shot("grant-03-running")
	waitLog(t, h, 10*time.Second, "oauth_grant_received", `"server":"gh"`, `"seat":"alice"`)

	// Alice's turn calls the server with her own token.
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	key := structured(t, callTool(t, cs, "create_work_item", map[string]any{"title": "Who am I at gh?"}))["key"].(string)
	callTool(t, cs, "comment_on_work_item", map[string]any{"key": key, "body": "@alice please check " + key})
	if c := awaitRound(t, model, key, 1); len(c.LastResults()) != 1 || !strings.Contains(c.LastResults()[0].Text, "subject=u-alice-gh") {
		t.Fatalf("alice's call to gh answered %+v, want her own subject", c.LastResults())
	}

	// The provider ends alice's sessions: the next renewal is refused,
	// and her child is held back as Failing, saying so.
	if err := prov.EndSessions(t.Context(), "u-alice-gh", clientID); err != nil {
		t.Fatal(err)
	}
	waitLog(t, h, 30*time.Second, "mcp_server_failed", `"server":"gh"`, `"seat":"alice"`)
	b.do("failing", chromedp.Navigate(base+"/servers/gh"), chromedp.WaitVisible(css(`#server-state[data-state="Failing"]`)))
	if got := b.text(`#grants tr[data-seat="alice"]`); !strings.Contains(got, "renew") {
		t.Errorf("alice's grant row reads %q, want the refused renewal", got)
	}
	b.shot("grant-04-refresh-refused")
	if strings.Contains(h.logs(), clientSecret) {
		t.Error("the hub's log holds the client secret")
	}
}
