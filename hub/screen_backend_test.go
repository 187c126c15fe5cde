package hub

import (
	"fmt"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	if rows[1].State != "Failing" || rows[1].FirstFailure() == nil {
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
