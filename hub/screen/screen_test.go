package screen

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a hub as the screen sees it: tokens that can be revoked, rows,
// tools, and a change feed a test moves.
type fake struct {
	mu      sync.Mutex
	tokens  map[string]authority.Principal
	servers []Server
	tools   []Tool
	added   []config.MCPServer
	checked int
	ver     uint64
	ch      chan struct{}
	// held is what HeldTools lists; decided, every decision asked, and
	// refuse, the refusal DecideTools answers when set.
	held    []toolpin.Change
	decided []decision
	refuse  *DecideResult
}

// decision is one DecideTools call, with who asked it.
type decision struct {
	by authority.Principal
	ToolDecision
}

func newFake() *fake {
	return &fake{
		tokens: map[string]authority.Principal{
			"admin-token": {TokenID: "laptop", Seat: "ada", Admin: true},
			"plain-token": {TokenID: "ci"},
		},
		servers: []Server{
			{Name: "up", Shared: true, State: "Running", Cells: []Cell{{Node: "this node", State: "Running", Tools: 1}}},
			{Name: "ghost", Shared: true, State: "Failing", Cells: []Cell{{Node: "this node", State: "Failing", Reason: "it failed to start: no such file"}}},
			{Name: "gh", State: "Partly failing", Cells: []Cell{{Node: "this node", State: "Partly failing", Seat: "bob", Reason: "its process exited"}}},
		},
		tools: []Tool{
			{Name: "echo", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}},
			{Name: "shrug", Source: "mcp:up", Delivers: "mcp:up"},
			{Name: "gh_issue", Source: "mcp:gh", PerSeat: true},
		},
		ch: make(chan struct{}),
	}
}

func (f *fake) Verify(token string) (authority.Principal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.tokens[token]
	return p, ok
}
func (f *fake) Current(id string, digest [sha256.Size]byte) (authority.Principal, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for tok, p := range f.tokens {
		if p.TokenID == id && authority.Digest(tok) == digest {
			return p, true
		}
	}
	return authority.Principal{}, false
}
func (f *fake) Servers() []Server     { return f.servers }
func (f *fake) Tools() []Tool         { return f.tools }
func (f *fake) SecretNames() []string { return []string{"GITHUB_TOKEN"} }
func (f *fake) AddServer(_ context.Context, e config.MCPServer, write bool) AddResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !write {
		f.checked++
		return AddResult{Status: 422, Violations: []string{"mcp_servers[3]: a stdio server needs a command"}, Entry: "mcp_servers[3]"}
	}
	f.added = append(f.added, e)
	return AddResult{Status: 201, Server: &Server{Name: e.Name, Shared: true, State: "Running", Cells: []Cell{{Node: "this node", State: "Running", Tools: 2}}}}
}
func (f *fake) HeldTools() []toolpin.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.held)
}

func (f *fake) DecideTools(_ context.Context, p authority.Principal, d ToolDecision) DecideResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decided = append(f.decided, decision{p, d})
	if f.refuse != nil {
		return *f.refuse
	}
	var out DecideResult
	for _, t := range d.Tools {
		out.Tools = append(out.Tools, DecidedTool{Tool: t.Tool, Now: "offered"})
	}
	return out
}

func (f *fake) Changes() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ver, f.ch
}

// change says something changed, as the hub's feed does.
func (f *fake) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ver++
	close(f.ch)
	f.ch = make(chan struct{})
}

func (f *fake) revoke(token string) {
	f.mu.Lock()
	delete(f.tokens, token)
	f.mu.Unlock()
	f.change()
}

type served struct {
	*fake
	*Screen
	url string
	// client keeps cookies and never follows redirects, so each answer is
	// read as it was given.
	client *http.Client
}

func serve(t *testing.T) *served { t.Helper(); return serveWith(t, Options{}) }

// serveWith serves the screen with opts, on a fake backend of its own.
func serveWith(t *testing.T, opts Options) *served {
	t.Helper()
	f := newFake()
	done := make(chan struct{})
	opts.Backend, opts.Done = f, done
	s := New(opts)
	mux := http.NewServeMux()
	s.Register(mux, func(h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { close(done); srv.Close() })
	jar, _ := cookiejar.New(nil)
	return &served{fake: f, Screen: s, url: srv.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (s *served) do(t *testing.T, method, path string, form url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, s.url+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// signIn signs in and answers the session's CSRF token, read off a page.
func (s *served) signIn(t *testing.T, token string) string {
	t.Helper()
	resp, _ := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Base {
		t.Fatalf("sign in: %s", resp.Status)
	}
	_, page := s.do(t, "GET", Base, nil)
	_, after, ok := strings.Cut(page, `data-csrf="`)
	if !ok {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	csrf, _, _ := strings.Cut(after, `"`)
	return csrf
}

// The session cookie is HttpOnly, SameSite=Strict and scoped to the
// screen; the token is in no page; every answer carries the
// Content-Security-Policy.
func TestSignInKeepsTheTokenInTheCookieOnly(t *testing.T) {
	s := serve(t)
	resp, _ := s.do(t, "GET", "/", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Base {
		t.Fatalf("/ answered %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, _ = s.do(t, "GET", Base, nil)
	if resp.Header.Get("Location") != Base+"/sign-in" {
		t.Fatalf("unsigned: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(body, "not a current operator token") {
		t.Fatalf("wrong token: %s cookies %v", resp.Status, resp.Cookies())
	}
	resp, _ = s.do(t, "POST", Base+"/sign-in", url.Values{"token": {"admin-token"}})
	c := resp.Cookies()
	if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != Base || strings.Contains(c[0].Value, "admin-token") {
		t.Fatalf("session cookie %+v", c)
	}
	for _, path := range []string{Base, Base + "/servers/ghost", Base + "?live=1"} {
		resp, body := s.do(t, "GET", path, nil)
		if resp.StatusCode != http.StatusOK || strings.Contains(body, "admin-token") {
			t.Fatalf("%s: %s, token in page %v", path, resp.Status, strings.Contains(body, "admin-token"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
	}
}

// A token revoked ends the session at its very next request: a page
// sends the person to sign in (the cookie cleared), the script's fetch is
// told 401, and an open event stream says signed-out at the next change.
func TestRevokedTokenEndsTheSession(t *testing.T) {
	s := serve(t)
	s.signIn(t, "admin-token")
	req, _ := http.NewRequest("GET", s.url+Base+"/events?since=0", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.client.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	next := func() string {
		for events.Scan() {
			if ev, ok := strings.CutPrefix(events.Text(), "event: "); ok {
				return ev
			}
		}
		return "(stream ended)"
	}
	s.change()
	if ev := next(); ev != "change" {
		t.Fatalf("after a change: %q", ev)
	}
	s.revoke("admin-token")
	if ev := next(); ev != "signed-out" {
		t.Fatalf("after the revocation: %q", ev)
	}
	if ev := next(); ev != "(stream ended)" {
		t.Fatalf("the stream went on: %q", ev)
	}
	r, _ := s.do(t, "GET", Base, nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != Base+"/sign-in?ended=1" {
		t.Fatalf("the page: %s to %q", r.Status, r.Header.Get("Location"))
	}
	// That answer cleared the cookie; a script still holding the page is
	// told 401 all the same.
	r, _ = s.do(t, "GET", Base+"?live=1", nil)
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the script's fetch: %s", r.Status)
	}
}

// A state-changing request needs the session's CSRF token and must not
// come from another origin, even with the session's cookie.
func TestChangesNeedTheSameOriginAndTheCSRFToken(t *testing.T) {
	s := serve(t)
	csrf := s.signIn(t, "admin-token")
	form := url.Values{"name": {"x"}, "command": {"/bin/true"}}
	for _, c := range []struct {
		why    string
		form   url.Values
		header []string
		want   int
	}{
		{"no CSRF token", form, nil, http.StatusForbidden},
		{"a wrong CSRF token", form, []string{"X-CSRF-Token", "forged"}, http.StatusForbidden},
		{"another site", withCSRF(form, csrf), []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"another origin of the same site", withCSRF(form, csrf), []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"an Origin that is not the host", withCSRF(form, csrf), []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
		{"the screen itself", withCSRF(form, csrf), []string{"Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
	} {
		resp, body := s.do(t, "POST", Base+"/servers", c.form, c.header...)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %s %s", c.why, resp.Status, body)
		}
	}
	if len(s.added) != 1 {
		t.Fatalf("%d servers added, want the one the screen sent", len(s.added))
	}
}

func withCSRF(v url.Values, csrf string) url.Values {
	out := url.Values{"csrf": {csrf}}
	for k, vs := range v {
		out[k] = vs
	}
	return out
}

// The form's own violations and the company's come back together, and
// nothing is written while any stands.
func TestAddAnswersEveryViolationAtOnce(t *testing.T) {
	s := serve(t)
	csrf := s.signIn(t, "admin-token")
	form := url.Values{"csrf": {csrf}, "name": {"x"}, "transport": {"stdio"},
		"env_name": {"", "A", "A"}, "env_value": {"orphan", "1", "2"}, "header_name": {"Authorization"}, "header_value": {"${T}"}}
	resp, body := s.do(t, "POST", Base+"/servers", form, "Accept", "application/json")
	var got struct{ Violations []string }
	_ = json.Unmarshal([]byte(body), &got)
	if resp.StatusCode != http.StatusUnprocessableEntity || len(got.Violations) != 4 || s.checked != 1 || len(s.added) != 0 {
		t.Fatalf("%s %q (checked %d, added %d)", resp.Status, got.Violations, s.checked, len(s.added))
	}
	for i, want := range []string{"no name", "given twice", "no headers", "needs a command"} {
		if !strings.Contains(got.Violations[i], want) {
			t.Errorf("violation %d %q, want one saying %q", i, got.Violations[i], want)
		}
	}
	// Without the script, the page is drawn again with them and what was
	// typed.
	resp, body = s.do(t, "POST", Base+"/servers", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "given twice") || !strings.Contains(body, `value="orphan"`) {
		t.Fatalf("page answer: %s", resp.Status)
	}
	// A good one is written as entered.
	resp, _ = s.do(t, "POST", Base+"/servers", url.Values{"csrf": {csrf}, "name": {"gh2"}, "transport": {"stdio"},
		"command": {"github-mcp-server"}, "args": {"stdio\r\n\r\n--read-only"}, "reach": {"per-seat"},
		"env_name": {"GITHUB_TOKEN", ""}, "env_value": {"${GITHUB_TOKEN}", ""}}, "Accept", "application/json")
	if resp.StatusCode != http.StatusCreated || len(s.added) != 1 {
		t.Fatalf("good form: %s", resp.Status)
	}
	e := s.added[0]
	if e.Name != "gh2" || e.Command != "github-mcp-server" || strings.Join(e.Args, " ") != "stdio --read-only" ||
		e.Shared == nil || *e.Shared || e.Env["GITHUB_TOKEN"] != "${GITHUB_TOKEN}" || len(e.Env) != 1 || e.Headers != nil ||
		e.Trust != config.TrustPinned {
		t.Fatalf("written %+v", e)
	}
	// Issue 28: pinned unless the form says auto; the choice is drawn
	// checked on a fresh form.
	s.do(t, "POST", Base+"/servers", url.Values{"csrf": {csrf}, "name": {"mine"}, "transport": {"stdio"},
		"command": {"my-server"}, "trust": {"auto"}}, "Accept", "application/json")
	if len(s.added) != 2 || s.added[1].Trust != config.TrustAuto {
		t.Fatalf("a form that says auto wrote %+v", s.added)
	}
	if _, page := s.do(t, "GET", Base, nil); !strings.Contains(page, `name="trust" value="pinned" checked`) {
		t.Fatal("a fresh form does not offer pinned, checked")
	}
}

// A credential that is not an administrator's sees the catalogue, not the
// server rows or pages (they show how servers are launched), nor the
// per-seat tools, and cannot add a server.
func TestServerRowsAreForAdministrators(t *testing.T) {
	s := serve(t)
	csrf := s.signIn(t, "plain-token")
	_, body := s.do(t, "GET", Base, nil)
	if strings.Contains(body, `id="servers"`) || strings.Contains(body, "add-server") || strings.Contains(body, "gh_issue") || !strings.Contains(body, `data-tool="shrug"`) {
		t.Fatalf("a plain credential's page:\n%s", body)
	}
	for _, path := range []string{Base + "/servers/up", Base + "/secret-names"} {
		if resp, _ := s.do(t, "GET", path, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}
	if resp, _ := s.do(t, "POST", Base+"/servers", url.Values{"csrf": {csrf}, "name": {"x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("add: %s", resp.Status)
	}
}

// The live region is served alone for the script, and the page reads
// each row's first failure with its seat, and a failed server as a group
// with no tools.
func TestLiveRegionAndRows(t *testing.T) {
	s := serve(t)
	s.signIn(t, "admin-token")
	_, body := s.do(t, "GET", Base+"?live=1", nil)
	if strings.Contains(body, "<html") || strings.Contains(body, "add-server") || !strings.Contains(body, `id="servers"`) {
		t.Fatalf("live region:\n%s", body)
	}
	for _, want := range []string{
		`<tr id="server-ghost" data-server="ghost" data-state="Failing">`,
		`seat bob · this node`,
		`class="group missing" data-source="mcp:ghost"`,
		`data-source="mcp:gh"`, `data-tool="gh_issue"`,
		`data-asserts="unknown"`, `data-asserts="read-only"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("live region lacks %s", want)
		}
	}
	_, body = s.do(t, "GET", Base+"/secret-names", nil)
	if strings.TrimSpace(body) != `{"names":["GITHUB_TOKEN"]}` {
		t.Errorf("secret names %s", body)
	}
}

// The strongest thing a tool's hints positively assert; unknown when they
// assert nothing.
func TestAsserts(t *testing.T) {
	y, n, u := servers.Yes, servers.No, servers.Unknown
	for _, c := range []struct {
		h    servers.Hints
		want string
	}{
		{servers.Hints{}, "unknown"},
		{servers.Hints{OpenWorld: y}, "unknown"},
		{servers.Hints{ReadOnly: y, Destructive: y}, "read-only"},
		{servers.Hints{ReadOnly: u, Destructive: y, Idempotent: y}, "destructive, idempotent"},
		{servers.Hints{ReadOnly: n, Destructive: n}, "writes, not destructive"},
		{servers.Hints{ReadOnly: n}, "writes"},
		{servers.Hints{ReadOnly: n, Idempotent: y}, "writes, idempotent"},
		{servers.Hints{Idempotent: y}, "idempotent"},
		{servers.Hints{ReadOnly: n, Idempotent: n}, "writes"},
	} {
		if got := Asserts(c.h).Label; got != c.want {
			t.Errorf("%+v: %q, want %q", c.h, got, c.want)
		}
	}
}
