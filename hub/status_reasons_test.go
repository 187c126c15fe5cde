package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/secrets"
)

// MCP-12, MCP-11: a per-seat server with one seat's child failing (a
// header names a variable nothing sets: mcp_server_credential_missing) and
// another's waiting (its OAuth grant: mcp_server_awaiting_credential)
// reads Failing, and its cell carries both reasons, each with its seat —
// on GET /mcp-servers, in the screen's servers table and on the server's
// own page — rather than the failure alone.
func TestCellShowsEveryReasonWithItsSeat(t *testing.T) {
	doc := `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice, mcp_env: {gh: {}}}
      - {name: Bob, handle: bob, mcp_env: {gh: {X-Bob-Key: "${BOB_GH_KEY}"}}}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - name: gh
    shared: false
    url: http://127.0.0.1:9/mcp
    auth: oauth
    oauth: {client_id: crewlet-hub, scopes: [openid]}
`
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	vault, err := secrets.OpenGrants(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ev := logEvents{ch: make(chan slog.Record, 4096)}
	h, err := New(context.Background(), Options{Company: c, Logger: slog.New(ev), Grants: vault,
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	// Both holds are logged once the row reads them, in either order.
	want := map[string]string{"mcp_server_awaiting_credential": "seat=alice", "mcp_server_credential_missing": "seat=bob"}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case r := <-ev.ch:
			seat, ok := want[r.Message]
			if !ok {
				continue
			}
			attrs := map[string]bool{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.String()] = true; return true })
			if attrs[seat] && attrs["server=gh"] {
				delete(want, r.Message)
			}
			if r.Message == "mcp_server_credential_missing" && !attrs["variable=BOB_GH_KEY"] {
				t.Errorf("mcp_server_credential_missing does not name the variable: %v", attrs)
			}
		case <-deadline:
			t.Fatalf("not logged within 10s: %v", want)
		}
	}

	base := hubtest.Serve(t, h.Handler())
	var body struct {
		Servers []serverRow `json:"servers"`
	}
	getJSON(t, base+"/mcp-servers", "ada-token-123456", &body)
	if len(body.Servers) != 1 || len(body.Servers[0].Nodes) != 1 {
		t.Fatalf("rows %+v", body.Servers)
	}
	row, cell := body.Servers[0], body.Servers[0].Nodes[0]
	if row.State != rowFailing || !strings.Contains(row.Reason, "BOB_GH_KEY") {
		t.Fatalf("the row reads %q (%s), want Failing for bob's variable", row.State, row.Reason)
	}
	if len(cell.Reasons) != 2 {
		t.Fatalf("the cell carries %d reasons, want bob's failure and alice's wait: %+v", len(cell.Reasons), cell.Reasons)
	}
	failing, waiting := cell.Reasons[0], cell.Reasons[1]
	if failing.State != rowFailing || !slices.Equal(failing.Seats, []string{"bob"}) || !strings.Contains(failing.Reason, "${BOB_GH_KEY}") ||
		strings.HasPrefix(failing.Reason, "seat ") {
		t.Errorf("the failure: %+v", failing)
	}
	if waiting.State != rowWaiting || !slices.Equal(waiting.Seats, []string{"alice"}) || !strings.Contains(waiting.Reason, "seat alice's grant") {
		t.Errorf("the wait: %+v", waiting)
	}

	// The screen: the servers table's reason cell and the server's page
	// show both sentences, each with its seat.
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar}
	resp, err := web.PostForm(base+"/settings/mcp-tools/sign-in", url.Values{"token": {"ada-token-123456"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, page := range []struct{ path, cell string }{
		{"/settings/mcp-tools?live=1", `<td class="reason">`},
		{"/settings/mcp-tools/servers/gh", `<table id="nodes">`},
	} {
		resp, err := web.Get(base + page.path)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, resp)
		resp.Body.Close()
		_, region, ok := strings.Cut(got, page.cell)
		region, _, _ = strings.Cut(region, "</table>")
		if !ok {
			t.Fatalf("%s has no %s:\n%s", page.path, page.cell, got)
		}
		for _, w := range []string{"${BOB_GH_KEY}", "seat alice&#39;s grant"} {
			if !strings.Contains(region, w) {
				t.Errorf("%s does not show %q:\n%s", page.path, w, region)
			}
		}
	}
	resp, _ = web.Get(base + "/settings/mcp-tools?live=1")
	live := readAll(t, resp)
	resp.Body.Close()
	for _, w := range []string{`seat bob · this node`, `seat alice · this node`} {
		if !strings.Contains(live, w) {
			t.Errorf("the servers table does not name %q", w)
		}
	}
}
