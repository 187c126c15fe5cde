package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Issue 39, Build 2, end to end: a seat whose upstream OAuth grant was
// made on the node holding it keeps the grant when kill -9 of that node
// moves it. Alice's child of a server protected by a real OpenID provider
// is authorized through the holder's screen; the holder is killed; the
// node that takes alice over starts her child Running with the grant, not
// Waiting for credentials, and her turn, woken through the balancer, calls
// the server as her own subject.
func TestFleetSeatKeepsItsGrantAcrossKill(t *testing.T) {
	t.Parallel()
	prov, model, doc := startGrantRig(t)
	b := newBalancedFleetOf(t, func(string, string) string { return doc },
		"E2E_MODEL_KEY=sk-e2e-model-key", "E2E_GH_CLIENT_SECRET="+clientSecret)
	holder := -1
	waitUntil(t, time.Minute, "alice placed on a node", func() (bool, string) {
		h := b.fleet(t, 0).Holders["alice"]
		for i := range 3 {
			if h == fmt.Sprintf("n%d", i) {
				holder = i
			}
		}
		return holder >= 0, h
	})
	h := b.hubs[holder]
	waitLog(t, h, 30*time.Second, "mcp_server_awaiting_credential", `"server":"gh"`, `"seat":"alice"`)

	// Authorized through the holder's own screen.
	base := h.baseURL() + "/settings/mcp-tools"
	prov.AddWebClient(clientID, clientSecret, base+"/oauth/callback")
	br := newBrowser(t)
	br.do("sign in", chromedp.Navigate(base), chromedp.WaitVisible(css("#sign-in")),
		chromedp.SendKeys(css("#token"), e2eToken), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css(`tr[data-server="gh"]`)))
	br.do("open gh's page", chromedp.Navigate(base+"/servers/gh"),
		chromedp.WaitVisible(css(`#grants tr[data-seat="alice"] a.authorize`)))
	br.do("authorize for alice", chromedp.Click(css(`#grants tr[data-seat="alice"] a.authorize`)),
		chromedp.WaitVisible(css("#username")))
	br.do("sign in at the provider", chromedp.SendKeys(css("#username"), "alice-gh"), chromedp.SendKeys(css("#password"), "pw-alice"),
		chromedp.Submit(css("#password")))
	waitLog(t, h, 30*time.Second, "oauth_grant_received", `"server":"gh"`, `"seat":"alice"`)
	holderName := fmt.Sprintf("n%d", holder)
	waitUntil(t, 30*time.Second, "alice's child Running on her holder", func() (bool, string) {
		c := b.cellOf(t, holder, "gh", holderName)
		return c != nil && c["state"] == "Running", fmt.Sprint(c)
	})

	// kill -9 of the holder: alice moves, and her child starts with the
	// grant on her new node.
	killed := time.Now()
	b.kill(t, holder)
	live := (holder + 1) % 3
	var moved string
	waitUntil(t, 3*fleetTTL, "alice moves", func() (bool, string) {
		moved = b.fleet(t, live).Holders["alice"]
		return moved != "" && moved != holderName, moved
	})
	var now int
	fmt.Sscanf(moved, "n%d", &now)
	waitUntil(t, 30*time.Second, "alice's child Running with her grant on "+moved, func() (bool, string) {
		c := b.cellOf(t, now, "gh", moved)
		return c != nil && c["state"] == "Running", fmt.Sprint(c)
	})
	for _, line := range strings.Split(b.hubs[now].logs(), "\n") {
		if strings.Contains(line, `"mcp_server_awaiting_credential"`) && strings.Contains(line, `"seat":"alice"`) {
			t.Errorf("%s waited for alice's credentials after she moved there: %s", moved, line)
		}
	}

	// Her turn, woken through the balancer once her new node has opened
	// her mailbox, calls gh as her own subject.
	waitUntil(t, 30*time.Second, moved+" opens alice's mailbox", func() (bool, string) {
		_, ok := b.eventAt(now, "mailbox_opened", "alice", killed)
		return ok, "not yet"
	})
	through, err := goSDKClient(t, b.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	key := structured(t, callTool(t, through, "create_work_item", map[string]any{"title": "Who am I at gh, after the move?"}))["key"].(string)
	callTool(t, through, "comment_on_work_item", map[string]any{"key": key, "body": "@alice please check " + key})
	if c := awaitRound(t, model, key, 1); len(c.LastResults()) != 1 || !strings.Contains(c.LastResults()[0].Text, "subject=u-alice-gh") {
		t.Fatalf("alice's call to gh after the move answered %+v, want her own subject", c.LastResults())
	}
}
