package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/html"
)

// The screen reads the hub's rows and catalogues through its view model:
// one cell per node with the seat apart from the reason, the company's
// tools and, marked per seat, a seat's own children's.
func TestScreenBackendReadsRowsAndTools(t *testing.T) {
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, up), `{name: ghost, command: /nonexistent/bin/ghost}`))
	b := screenBackend{th.operator}
	rows := b.Servers()
	if len(rows) != 2 || rows[0].Name != "up" || rows[0].State != "Running" || len(rows[0].Cells) != 1 || rows[0].Cells[0].Tools != 1 {
		t.Fatalf("rows %+v", rows)
	}
	if n := rows[1].Reason(); rows[1].State != "Failing" || n == nil || n.State != "Failing" {
		t.Fatalf("ghost %+v", rows[1])
	}
	if err := th.servers.seatCatalogue("bot").Add(entry("seat_only", SourceMCP("github"))); err != nil {
		t.Fatal(err)
	}
	tools := map[string]bool{}
	for _, tool := range b.Tools() {
		tools[fmt.Sprintf("%s %s %v", tool.Name, tool.Source, tool.PerSeat)] = true
	}
	for _, want := range []string{"echo builtin false", "echo_up mcp:up false", "seat_only mcp:github true"} {
		if !tools[want] {
			t.Errorf("tools lack %q: %v", want, tools)
		}
	}
	if _, ok := b.Verify(""); ok {
		t.Fatal("an empty token verified")
	}
	if p, ok := b.Verify("ada-token-123456"); !ok || !p.Admin {
		t.Fatalf("ada's token: %+v %v", p, ok)
	}
}

func TestSeatOfReason(t *testing.T) {
	for _, c := range []struct{ in, seat, rest string }{
		{"seat bob: its process exited", "bob", "its process exited"},
		{"it failed to start: seat bob: x", "", "it failed to start: seat bob: x"},
		{"seat belt broke: badly", "", "seat belt broke: badly"},
		{"", "", ""},
	} {
		if seat, rest := seatOfReason(c.in); seat != c.seat || rest != c.rest {
			t.Errorf("%q: %q %q", c.in, seat, rest)
		}
	}
}

// screenClient is a person signed in to the hub's screen over HTTP: a
// cookie jar holding the session and the CSRF token its pages carry.
type screenClient struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

// signInScreen signs in to the screen of the hub at url with token.
func signInScreen(t *testing.T, url, token string) *screenClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &screenClient{t: t, base: url + screen.Base, c: &http.Client{Jar: jar}}
	resp, err := s.c.PostForm(s.base+"/sign-in", neturl.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	doc := s.page("")
	body := find(doc, func(n *html.Node) bool { return n.Data == "body" })
	if len(body) == 0 || attr(body[0], "data-csrf") == "" {
		t.Fatal("signed in, but the page carries no CSRF token")
	}
	s.csrf = attr(body[0], "data-csrf")
	return s
}

// get reads a page of the screen as text.
func (s *screenClient) get(path string) string {
	s.t.Helper()
	resp, err := s.c.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

// page reads a page of the screen, parsed.
func (s *screenClient) page(path string) *html.Node {
	s.t.Helper()
	doc, err := html.Parse(strings.NewReader(s.get(path)))
	if err != nil {
		s.t.Fatal(err)
	}
	return doc
}

// add sends the add-server form as the screen's script does, and answers
// its status and JSON answer.
func (s *screenClient) add(form neturl.Values) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.base+"/servers", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-CSRF-Token", s.csrf)
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		s.t.Fatalf("add answered %s, not JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, body
}

// find lists the elements under n that match, in document order.
func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

// attr is an element's attribute, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// text is an element's text, its whitespace folded.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// within reports whether n lies inside an element named tag.
func within(n *html.Node, tag string) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == tag {
			return true
		}
	}
	return false
}

// notesServer is a second first-party server, so the builtins come from
// two servers as on a real hub (where six serve some sixty tools).
func notesServer() FirstParty {
	return FirstParty{Name: "notes", New: func(tr servers.Trust, _ Deps) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "jot", Description: "Jot a note."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
		return s
	}}
}

// CAT-2: the catalogue, grouped by source, leads with the servers an
// operator added: every mcp: group comes before the builtins, and the
// builtins are folded, one closed <details> per first-party server, its
// tool count in the summary, so the hub's own tools no longer fill the
// page before the first third-party server.
func TestScreenThirdPartyFirstBuiltinsFolded(t *testing.T) {
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, up)),
		func(o *Options) { o.FirstParty = append(o.FirstParty, notesServer()) })
	doc := signInScreen(t, th.url, "ada-token-123456").page("")

	var sources []string
	for _, g := range find(doc, func(n *html.Node) bool { return n.Data == "section" && hasAttr(n, "data-source") }) {
		sources = append(sources, attr(g, "data-source"))
	}
	if !slices.Equal(sources, []string{"mcp:up", "builtin"}) {
		t.Fatalf("groups in the order %q, want the third-party server first", sources)
	}
	folds := find(doc, func(n *html.Node) bool { return n.Data == "details" })
	got := map[string]string{}
	for _, d := range folds {
		if hasAttr(d, "open") {
			t.Errorf("the %s fold is open", attr(d, "data-server"))
		}
		sum := find(d, func(n *html.Node) bool { return n.Data == "summary" })
		if len(sum) != 1 {
			t.Fatalf("the %s fold has %d summaries", attr(d, "data-server"), len(sum))
		}
		got[attr(d, "data-server")] = text(sum[0])
	}
	// catalogue serves list_mcp_server_tools, mounted since the company
	// declares a server (CAT-13).
	if want := map[string]string{"catalogue": "catalogue 1 tool", "kit": "kit 1 tool", "notes": "notes 1 tool"}; !maps.Equal(got, want) {
		t.Fatalf("builtin folds %q, want %q", got, want)
	}
	for _, row := range find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasAttr(n, "data-tool") }) {
		builtin := attr(row, "data-tool") != "echo_up"
		if within(row, "details") != builtin {
			t.Errorf("tool %s: folded %v", attr(row, "data-tool"), !builtin)
		}
	}
}

// MCP-12: a reason is said once: in its server's row, where the
// catalogue's missing group and the server's own page point to it rather
// than print it again.
func TestScreenSaysEachReasonOnce(t *testing.T) {
	th := newTestHub(t, withServers(t, `{name: ghost, command: /nonexistent/bin/ghost}`))
	s := signInScreen(t, th.url, "ada-token-123456")
	row := awaitRow(t, th.Hub, "ghost", rowFailing, 20*time.Second)
	_, reason, _ := strings.Cut(row.Reason, ": ") // after the node's name
	if !strings.Contains(reason, "/nonexistent/bin/ghost") {
		t.Fatalf("ghost's reason %q", reason)
	}
	escaped := template.HTMLEscapeString(reason)
	for _, path := range []string{"", "/servers/ghost"} {
		if n := strings.Count(s.get(path), escaped); n != 1 {
			t.Errorf("page %q says ghost's reason %d times, want once", screen.Base+path, n)
		}
	}
	doc := s.page("")
	cells := find(doc, func(n *html.Node) bool {
		return n.Data == "td" && strings.Contains(attr(n, "class"), "reason") && within(n, "table")
	})
	var said []string
	for _, c := range cells {
		if strings.Contains(text(c), reason) {
			said = append(said, text(c))
		}
	}
	if len(said) != 1 {
		t.Fatalf("ghost's row says its reason in %d cells: %q", len(said), said)
	}
}

// MCP-12: every column of the servers table says something of some row:
// the per-node cells, and one reason column that explains a failing row
// and a per-seat server no seat declares credentials for alike. (A column
// for the first instance waiting for a credential read "none" in every
// row: this hub holds no server for a credential a provisioning pass will
// mint, as nothing mints one.)
func TestScreenServersTableHasNoEmptyColumn(t *testing.T) {
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, up),
		`{name: ghost, command: /nonexistent/bin/ghost}`, `{name: nobody, shared: false, command: /bin/true}`))
	awaitRow(t, th.Hub, "ghost", rowFailing, 20*time.Second)
	doc := signInScreen(t, th.url, "ada-token-123456").page("")
	table := find(doc, func(n *html.Node) bool { return n.Data == "table" && attr(n, "id") == "servers" })
	if len(table) != 1 {
		t.Fatal("no servers table")
	}
	var heads []string
	for _, head := range find(table[0], func(n *html.Node) bool { return n.Data == "th" && within(n, "thead") }) {
		heads = append(heads, text(head))
	}
	said := make([]bool, len(heads))
	byServer := map[string][]string{}
	for _, tr := range find(table[0], func(n *html.Node) bool { return n.Data == "tr" && hasAttr(n, "data-server") }) {
		var cells []string
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
				cells = append(cells, text(c))
			}
		}
		if len(cells) != len(heads) {
			t.Fatalf("row %s has %d cells under %d columns", attr(tr, "data-server"), len(cells), len(heads))
		}
		for i, c := range cells {
			said[i] = said[i] || (c != "" && c != "none")
		}
		byServer[attr(tr, "data-server")] = cells
	}
	for i, h := range heads {
		if !said[i] {
			t.Errorf("column %q reads none in every row", h)
		}
	}
	if got := strings.Join(byServer["nobody"], " | "); !strings.Contains(got, "no agent seat declares credentials") {
		t.Errorf("the per-seat server no seat has credentials for reads %q, with no reason", got)
	}
}

// OPS-7, CAT-12: the add form's answer is the server's first state, not
// the write alone: a server whose tools collide with the hub's is answered
// failing with the collision, as its row reads, and is stopped, its
// process ending; one that starts is answered running with its tools.
func TestScreenAddAnswersTheFirstState(t *testing.T) {
	mark := func(s string) string { return t.Name() + "/" + s }
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(testCompany), 0o600); err != nil {
		t.Fatal(err)
	}
	th := newTestHub(t, func(o *Options) { o.ConfigFile = cfg })
	s := signInScreen(t, th.url, "ada-token-123456")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	form := func(name, prefix string) neturl.Values {
		return neturl.Values{"name": {name}, "transport": {"stdio"}, "command": {exe}, "reach": {"shared"}, "tool_prefix": {prefix},
			"env_name": {benchEchoVar, markVar}, "env_value": {"stdio", mark(name)}}
	}

	// Its echo is the kit's builtin echo's name.
	status, body := s.add(form("dup", ""))
	reason, _ := body["reason"].(string)
	if status != http.StatusCreated || body["state"] != rowFailing || !strings.Contains(reason, `tool name collision`) {
		t.Fatalf("adding a colliding server answered %d %v, want 201 saying it is Failing for the collision", status, body)
	}
	row := awaitRow(t, th.Hub, "dup", rowFailing, 20*time.Second)
	if !strings.Contains(row.Reason, reason) {
		t.Fatalf("the answer's reason %q is not the row's %q", reason, row.Reason)
	}
	awaitExit(t, marked(mark("dup")), 20*time.Second)

	status, body = s.add(form("fine", "fine_"))
	if status != http.StatusCreated || body["state"] != rowRunning || body["tools"] != 1.0 || body["reason"] != nil {
		t.Fatalf("adding a server that starts answered %d %v, want 201 Running with its one tool", status, body)
	}
	if e, ok := th.Catalogue().Get("fine_echo"); !ok || e.Source != SourceMCP("fine") {
		t.Fatal("answered running before its tools were filed")
	}
	if pids := marked(mark("fine")); len(pids) != 1 {
		t.Fatalf("the running server's process: %v", pids)
	}
}

// OPS-7: a violation of the company with the new server in it is said in
// the form's words: its field, not the YAML path of the entry the form
// would have added (mcp_servers[1].name).
func TestScreenAddNamesTheFormsFields(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(testCompany), 0o600); err != nil {
		t.Fatal(err)
	}
	th := newTestHub(t, func(o *Options) { o.ConfigFile = cfg })
	s := signInScreen(t, th.url, "ada-token-123456")
	status, body := s.add(neturl.Values{"name": {"Not A Slug"}, "transport": {"stdio"}, "reach": {"shared"},
		"env_name": {"API_KEY"}, "env_value": {"a\x00b"}})
	said, _ := json.Marshal(body["violations"])
	if status != http.StatusUnprocessableEntity || strings.Contains(string(said), "mcp_servers[") ||
		!strings.Contains(string(said), `Name: \"Not A Slug\" must be lower-case`) ||
		!strings.Contains(string(said), "A stdio server needs a command") ||
		!strings.Contains(string(said), "Environment variable API_KEY: holds the control character") {
		t.Fatalf("adding a bad server answered %d %s", status, said)
	}
}
