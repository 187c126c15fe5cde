package toolpin

import (
	"path/filepath"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 28, item 3: list_tool_changes and decide_tool_change, frozen in
// testdata/toolsnaps, keep the rules every tool keeps, and both are
// operator-only: listed with the operator audience, so the hub offers
// them to no seat.
func TestToolChangesSurface(t *testing.T) {
	d := Deps{Store: NewStore(openNode(t, filepath.Join(t.TempDir(), "state"))),
		Directory: func() *authority.Directory { return nil }, Held: func() []Change { return nil }, Refresh: func() {}}
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server { return NewServer(d, trust, nil) })
	lt, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 2 || lt.Tools[0].Name != "decide_tool_change" || lt.Tools[1].Name != "list_tool_changes" {
		t.Fatalf("listed %v", lt.Tools)
	}
	for _, tool := range lt.Tools {
		if tool.Meta[servers.MetaAudience] != servers.AudienceOperator {
			t.Errorf("%s is not operator-only: %v", tool.Name, tool.Meta)
		}
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}

// Which tools are held is for people: a seat that reached the tool past
// the hub (which offers it to none) is refused.
func TestListToolChangesRefusesSeats(t *testing.T) {
	d := Deps{Store: NewStore(openNode(t, filepath.Join(t.TempDir(), "state"))),
		Directory: func() *authority.Directory { return nil }, Held: func() []Change { return nil }, Refresh: func() {}}
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server { return NewServer(d, trust, nil) })
	res := c.Raw(authority.Caller{Seat: "bot", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}, "list_tool_changes", map[string]any{})
	if class, _ := servers.ClassOf(res); class != authority.Forbidden {
		t.Fatalf("a seat's list: %s", class)
	}
	res = c.Raw(authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada"}, "list_tool_changes", map[string]any{})
	if res.IsError {
		t.Fatalf("a person's list refused: %v", res.Content)
	}
}
