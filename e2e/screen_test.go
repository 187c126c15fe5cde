package e2e_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// screenSecret is sealed in the hub's secret store: the form offers its
// name, and its value must appear nowhere a browser reads.
const (
	tempToken         = "e2e-temporary-token-0002"
	screenSecretName  = "SCREEN_API_KEY"
	screenSecretValue = "screen-secret-value-7f3a9c"
)

// screenHub runs the built binary with a real stdio server (whose restarts
// after the first take five seconds, so a killed child is seen down), a
// server that cannot start, and a per-seat template one agent seat has
// credentials for; a secret is sealed in its store.
func screenHub(t *testing.T) *hubProc {
	t.Helper()
	bin := buildEverythingServer(t)
	dir := t.TempDir()
	set := exec.Command(crewletBinary(t), "secrets", "set", screenSecretName, "--data-dir", dir)
	set.Stdin = strings.NewReader(screenSecretValue + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v %s", err, out)
	}
	marker := filepath.Join(t.TempDir(), "started-once")
	script := fmt.Sprintf(`if [ -f %q ]; then sleep 5; fi; touch %q; exec %q`, marker, marker, bin)
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Helper
        handle: helper
        mcp_env:
          perseat: {WHO: screen-perseat}
api:
  auth:
    tokens:
      - {id: ada, token: "${E2E_TOKEN}", seat: ada}
      - {id: temp, token: "${E2E_TEMP_TOKEN}", admin: true}
mcp_servers:
  - name: everything
    command: /bin/sh
    args: ["-c", %q]
    env: {WHO: screen-everything}
    trust: auto
    tool_annotations:
      test_simple_text: {read_only: true, open_world: false}
      no_such_tool: {read_only: true}
  - name: ghost
    command: /nonexistent/bin/mcp-ghost
  - name: perseat
    shared: false
    command: %q
    tool_prefix: ps_
    trust: auto
`, script, bin)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHubIn(t, dir, []string{"E2E_TOKEN=" + e2eToken, "E2E_TEMP_TOKEN=" + tempToken}, "--config", cfg)
	h.configPath = cfg
	return h
}

// Settings › MCP Tools in headless chromium against the built hub: a wrong
// token refused; sign-in; each server's row and state; the catalogue
// grouped by source, unknown hints shown as unknown and a failed server as
// a missing group; a server's own page; every violation of a bad form at
// once; a server added through the form whose tools appear without a
// reload; a killed child's row changing and coming back, without a reload;
// a cross-site POST refused. Screenshots of each step are saved.
func TestSettingsMCPToolsInABrowser(t *testing.T) {
	h := screenHub(t)
	bin := buildEverythingServer(t)
	b := newBrowser(t)
	base := h.baseURL() + "/settings/mcp-tools"

	// / leads to the screen, which asks for a token; a wrong one is
	// refused and sets nothing.
	b.do("open the hub", chromedp.Navigate(h.baseURL()+"/"), chromedp.WaitVisible(css("#sign-in")))
	b.do("a wrong token", chromedp.SendKeys(css("#token"), "not-the-token"), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css("#signin-error")))
	if got := b.text("#signin-error"); !strings.Contains(got, "not a current operator token") {
		t.Fatalf("wrong token said %q", got)
	}
	if cs := b.cookies(base); len(cs) != 0 {
		t.Fatalf("a wrong token set cookies %v", cs)
	}
	b.shot("01-wrong-token")

	b.do("sign in", chromedp.SendKeys(css("#token"), e2eToken), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css("#servers")))
	var session *network.Cookie
	for _, c := range b.cookies(base) {
		if c.Name == "crewlet_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie %+v, want HttpOnly and SameSite=Strict", session)
	}
	// The cookie names a session the hub keeps; it holds no token, in any
	// encoding (issue 26, item 3).
	if strings.Contains(session.Value, e2eToken) || strings.Contains(session.Value, base64.RawURLEncoding.EncodeToString([]byte(e2eToken))) {
		t.Fatalf("the session cookie holds the token: %q", session.Value)
	}
	if html := evalIn[string](b, "document.documentElement.outerHTML + location.href"); strings.Contains(html, e2eToken) {
		t.Fatal("the operator token is in the page or its address")
	}

	// Each server's row and state.
	b.do("the rows", chromedp.WaitVisible(css(`tr[data-server="everything"][data-state="Running"]`)),
		chromedp.WaitVisible(css(`tr[data-server="ghost"][data-state="Failing"]`)),
		chromedp.WaitVisible(css(`tr[data-server="perseat"][data-state="Running"]`)))
	if got := b.text(`tr[data-server="ghost"] td.reason`); !strings.Contains(got, "mcp-ghost") {
		t.Fatalf("ghost's reason reads %q", got)
	}

	// The catalogue by source, the servers an operator added first: a
	// hint the server never sent reads unknown, never as a read; an
	// override reads as it says; the failed server is a missing group;
	// the per-seat server's tools are its own. The builtins come last,
	// folded by first-party server, closed, each with its count.
	b.do("the catalogue", chromedp.WaitVisible(css(`section.missing[data-source="mcp:ghost"]`)),
		chromedp.WaitVisible(css(`section[data-source="mcp:perseat"] tr[data-tool="ps_test_simple_text"]`)),
		chromedp.WaitVisible(css(`section[data-source="builtin"] details[data-server="builtins"] summary`)))
	if got := evalIn[[]string](b, `[...document.querySelectorAll("section.group")].map(s => s.dataset.source)`); len(got) == 0 ||
		got[0] != "mcp:everything" || got[len(got)-1] != "builtin" {
		t.Errorf("catalogue groups in the order %q, want the third-party servers first and the builtins last", got)
	}
	if open := evalIn[int](b, `document.querySelectorAll("details.first-party[open]").length`); open != 0 {
		t.Errorf("%d builtin folds open on arrival", open)
	}
	if got := b.text(`details[data-server="builtins"] summary`); !strings.Contains(got, "builtins") || !strings.Contains(got, "tools") {
		t.Errorf("the builtins fold's summary reads %q", got)
	}
	if h := evalIn[float64](b, `document.querySelector('section[data-source="builtin"]').getBoundingClientRect().height`); h > 600 {
		t.Errorf("the folded builtins take %.0f px", h)
	}
	b.do("open the builtins fold", chromedp.Click(css(`details[data-server="builtins"] summary`)),
		chromedp.WaitVisible(css(`details[data-server="builtins"] tr[data-tool="lookup_colleague"]`)))
	cell := func(tool, col string) string {
		return b.text(fmt.Sprintf(`section[data-source="mcp:everything"] tr[data-tool=%q] td.%s`, tool, col))
	}
	for _, c := range []struct{ tool, col, want string }{
		{"test_error_handling", "asserts", "unknown"},
		{"test_error_handling", "reaches", "unknown"},
		{"test_simple_text", "asserts", "read-only"},
		{"test_simple_text", "reaches", "no"},
		{"test_simple_text", "delivers", "nowhere"},
		{"test_error_handling", "delivers", "mcp:everything"},
	} {
		if got := cell(c.tool, c.col); got != c.want {
			t.Errorf("%s %s reads %q, want %q", c.tool, c.col, got, c.want)
		}
	}
	// Its reason is said once, in its row: the group points there.
	if got := b.text(`section[data-source="mcp:ghost"]`); !strings.Contains(got, "no tools") || !strings.Contains(got, "its row") || strings.Contains(got, "mcp-ghost") {
		t.Errorf("ghost's group reads %q", got)
	}
	b.shot("02-mcp-tools")

	// A server's own page: its state, every node's full reason, and that
	// it registered no tools and why; another's unlisted annotations.
	b.do("open ghost's page", chromedp.Click(css(`a[href="/settings/mcp-tools/servers/ghost"]`)),
		chromedp.WaitVisible(css("#no-tools")))
	if got := b.text("#no-tools"); !strings.Contains(got, "registered no tools") || !strings.Contains(got, "under Nodes") {
		t.Errorf("ghost's page says %q", got)
	}
	if got := b.text(`#nodes tr[data-state="Failing"] .full-reason`); !strings.Contains(got, "no such file or directory") {
		t.Errorf("ghost's node reason %q", got)
	}
	b.shot("03-server-ghost")
	b.do("open everything's page", chromedp.Navigate(base+"/servers/everything"), chromedp.WaitVisible(css("#unlisted")))
	if got := b.text("#unlisted"); got != "no_such_tool" {
		t.Errorf("unlisted annotations %q", got)
	}
	if got := b.text("#server-reach"); !strings.Contains(got, "Shared") {
		t.Errorf("reach %q", got)
	}
	b.shot("04-server-everything")

	// The form answers every violation at once: its own and the
	// company's, and writes nothing.
	before, _ := os.ReadFile(h.configPath)
	b.do("a bad form", chromedp.Navigate(base), chromedp.WaitVisible(css("#add-server")),
		chromedp.SendKeys(css("#add-name"), "Not A Slug"),
		chromedp.SendKeys(css("#env-value-0"), "orphan value"),
		chromedp.Click(css(`#add-server button[type=submit]`)),
		chromedp.WaitVisible(css("#add-result li")))
	violations := evalIn[[]string](b, `[...document.querySelectorAll("#add-result li")].map(li => li.textContent)`)
	joined := strings.Join(violations, "\n")
	if len(violations) < 3 || !strings.Contains(joined, "no name") || !strings.Contains(joined, "name") || !strings.Contains(joined, "command") {
		t.Fatalf("violations shown: %q", violations)
	}
	if after, _ := os.ReadFile(h.configPath); string(after) != string(before) {
		t.Fatal("a refused form changed the company file")
	}
	b.shot("05-add-violations")

	// A good form: the secret's name is offered as $ is typed, never its
	// value; the server is added and its tools appear without a reload.
	b.do("a fresh page", chromedp.Navigate(base), chromedp.WaitVisible(css("#add-server")))
	evalIn[bool](b, `window.__notReloaded = true`)
	b.do("fill the form", chromedp.SendKeys(css("#add-name"), "added"),
		chromedp.SendKeys(css("#add-command"), bin),
		chromedp.SendKeys(css("#add-prefix"), "added_"),
		chromedp.SendKeys(css("#env-name-1"), "MODE"),
		chromedp.SendKeys(css("#env-value-1"), "e2e"),
		chromedp.Click(css(`button.add-row[data-kind="env"]`)),
		chromedp.SendKeys(css("#env-name-2"), "LEVEL"),
		chromedp.SendKeys(css("#env-value-2"), "debug"),
		chromedp.SendKeys(css("#env-name-0"), "API_KEY"),
		chromedp.SendKeys(css("#env-value-0"), "$"),
		chromedp.WaitReady(css(`#secret-names option[value="${%s}"]`, screenSecretName)))
	if html := evalIn[string](b, "document.documentElement.outerHTML"); strings.Contains(html, screenSecretValue) {
		t.Fatal("a secret's value is in the page")
	}
	b.shot("06-add-secret-offered")
	b.do("submit the form", chromedp.SetValue(css("#env-value-0"), "${"+screenSecretName+"}"),
		chromedp.Click(css(`#add-server button[type=submit]`)),
		chromedp.WaitVisible(css("#add-result .ok")),
		waitFor(`document.querySelector("#add-result .ok").textContent.includes("running")`),
		chromedp.WaitVisible(css(`tr[data-server="added"][data-state="Running"]`)),
		chromedp.WaitVisible(css(`section[data-source="mcp:added"] tr[data-tool="added_test_simple_text"]`)))
	if !evalIn[bool](b, `window.__notReloaded === true`) {
		t.Fatal("the page was reloaded")
	}
	// Added, the form is a fresh one again: nothing typed left in it, the
	// row added for a third variable gone (issue 40, item 10).
	if left := evalIn[[]string](b, `[...document.querySelectorAll("#add-server input:not([type=hidden]):not([type=radio]), #add-server textarea")].filter(i => i.value !== "").map(i => i.id + "=" + i.value)`); len(left) != 0 {
		t.Errorf("the form still holds %q after the server was added", left)
	}
	if n := evalIn[int](b, `document.querySelectorAll('#add-server fieldset[data-kind="env"] .pair').length`); n != 2 {
		t.Errorf("the form has %d environment rows after the server was added, want the fresh form's 2", n)
	}
	cfg, _ := os.ReadFile(h.configPath)
	if i, j := strings.Index(string(cfg), "name: perseat"), strings.Index(string(cfg), "name: added"); i < 0 || j < i ||
		!strings.Contains(string(cfg), "${"+screenSecretName+"}") {
		t.Fatalf("the company file after the form:\n%s", cfg)
	}
	b.shot("07-added-live")

	// A server whose tools take names the hub holds: the form waits for
	// its first start and says it is failing, for the collision, as its
	// row does; it never reads as added and well.
	b.do("add a colliding server", chromedp.SendKeys(css("#add-name"), "everything2"),
		chromedp.SendKeys(css("#add-command"), bin),
		chromedp.Click(css(`#add-server button[type=submit]`)),
		chromedp.WaitVisible(css("#add-result .error")),
		chromedp.WaitVisible(css(`tr[data-server="everything2"][data-state="Failing"]`)))
	if got := b.text("#add-result"); !strings.Contains(got, "Added everything2 to the company file, but it is failing") ||
		!strings.Contains(got, "collision") || !strings.Contains(got, "stopped it") {
		t.Errorf("the form's answer for a colliding server reads %q", got)
	}
	if n := evalIn[int](b, `document.querySelectorAll("#add-result .ok").length`); n != 0 {
		t.Error("the form said a colliding server was added well")
	}
	if got := b.text(`tr[data-server="everything2"] td.reason`); !strings.Contains(got, "collision") {
		t.Errorf("everything2's row reads %q", got)
	}
	b.shot("07b-added-colliding")

	// A child killed: its row reads Failing with what took it down, then
	// Running again once restarted, all without a reload; a fold the
	// person opened stays open as the page follows.
	b.do("open the builtins fold", chromedp.Click(css(`details[data-server="builtins"] summary`)),
		chromedp.WaitVisible(css(`details[data-server="builtins"] tr[data-tool="lookup_colleague"]`)))
	if err := killChild(t, h, "screen-everything"); err != nil {
		t.Fatal(err)
	}
	b.do("the row goes down", chromedp.WaitVisible(css(`tr[data-server="everything"][data-state="Failing"]`)))
	if got := b.text(`tr[data-server="everything"] td.reason`); !strings.Contains(got, "signal 9") {
		t.Errorf("the killed server's failure reads %q", got)
	}
	// The page swapped its live region; the fold opened stays open.
	if !evalIn[bool](b, `document.querySelector('details[data-server="builtins"]').open`) {
		t.Error("the builtins fold closed when the page followed a change")
	}
	b.shot("08-child-killed")
	b.do("the row comes back", chromedp.WaitVisible(css(`tr[data-server="everything"][data-state="Running"]`)))
	if !evalIn[bool](b, `window.__notReloaded === true`) {
		t.Fatal("the page was reloaded")
	}
	b.shot("09-child-restarted")

	// A page on another origin of the same machine posts the form to the
	// hub: the browser sends the session cookie (the same site), and the
	// hub refuses the request all the same.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/servers">
<input name="name" value="evil"><input name="command" value="/bin/true"></form>
<script>document.getElementById("f").submit()</script>`, base)
	}))
	defer evil.Close()
	b.do("a cross-site POST", chromedp.Navigate(evil.URL),
		waitFor(fmt.Sprintf(`location.href.startsWith(%q) && document.body && document.body.innerText.includes("another origin")`, base)))
	b.shot("10-cross-site-refused")
	if cfg, _ := os.ReadFile(h.configPath); strings.Contains(string(cfg), "evil") {
		t.Fatal("a cross-site POST added a server")
	}
	if !strings.Contains(h.logs(), `"reason":"cross-origin request"`) {
		t.Error("the cross-site request was not logged as refused")
	}
	if strings.Contains(h.logs(), e2eToken) || strings.Contains(h.logs(), screenSecretValue) {
		t.Error("the hub's log holds the token or the secret")
	}

	// Signing out ends the session: the screen asks for a token again.
	b.do("sign out", chromedp.Navigate(base), chromedp.WaitVisible(css("form.signout")),
		chromedp.Submit(css("form.signout")), chromedp.WaitVisible(css("#sign-in")))
	b.do("signed out", chromedp.Navigate(base), chromedp.WaitVisible(css("#sign-in")))
	// The old cookie, sent again after sign-out, opens nothing.
	replay, _ := http.NewRequest("GET", base, nil)
	replay.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := noRedirect.Do(replay); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/settings/mcp-tools/sign-in?ended=1" {
		t.Fatalf("the signed-out cookie sent again: %s to %q", resp.Status, resp.Header.Get("Location"))
	}

	// A token revoked while its page is open: the reload that removes it
	// ends the session there, and the page goes back to sign-in by itself.
	b.do("sign in with a second token", chromedp.SendKeys(css("#token"), tempToken), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css("#servers")))
	cfg, _ = os.ReadFile(h.configPath)
	var kept []string
	for _, line := range strings.Split(string(cfg), "\n") {
		if !strings.Contains(line, "id: temp,") {
			kept = append(kept, line)
		}
	}
	revoked := strings.Join(kept, "\n")
	if revoked == string(cfg) {
		t.Fatalf("the temporary token is not in the company file:\n%s", cfg)
	}
	if err := os.WriteFile(h.configPath, []byte(revoked), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", h.baseURL()+"/config/reload", nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %s", resp.Status)
	}
	b.do("the session ends", chromedp.WaitVisible(css("#sign-in")), waitFor(`document.body.innerText.includes("session ended")`))
	b.shot("11-session-ended")
	if strings.Contains(h.logs(), "screen_render_failed") {
		t.Errorf("a page failed to draw:\n%s", h.logs())
	}
}
