package config

import (
	"maps"
	"testing"
)

// CFG-5, CFG-6: a shared server is one instance; a per-role template has
// one child per agent seat that ends up with a block for it — its unit's
// block under its own — and none for a person, a seat without a block, or
// a seat of a child unit (units inherit nothing from their parent).
func TestInstancesFollowTheSeatBlockRule_CFG5(t *testing.T) {
	c, err := Parse([]byte(`
units:
  - id: core
    name: Core
    mcp_env:
      gh: {GH_HOST: "${GH_HOST}"}
    roles:
      - {name: Own, handle: own, mcp_env: {gh: {GH_TOKEN: "${OWN_TOKEN}"}}}
      - {name: Inherits, handle: inherits}
      - {name: Ada, handle: ada, kind: human, admin: true}
  - id: plain
    name: Plain
    roles:
      - {name: Bare, handle: bare}
      - {name: Keyed, handle: keyed, mcp_env: {gh: {GH_TOKEN: "${KEYED_TOKEN}"}}}
  - id: sub
    name: Sub
    parent: core
    roles:
      - {name: Nephew, handle: nephew}
roles:
  - {name: Floating, handle: floating, mcp_env: {gh: {GH_TOKEN: "${FLOAT_TOKEN}"}}}
  - {name: Loose, handle: loose}
mcp_servers:
  - {name: tav, command: tavily-mcp}
  - {name: gh, command: gh-mcp, shared: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		server, seat string
		unit, own    map[string]string
	}
	host := map[string]string{"GH_HOST": "${GH_HOST}"}
	wants := []want{
		{server: "tav"},
		{server: "gh", seat: "own", unit: host, own: map[string]string{"GH_TOKEN": "${OWN_TOKEN}"}},
		{server: "gh", seat: "inherits", unit: host},
		{server: "gh", seat: "keyed", own: map[string]string{"GH_TOKEN": "${KEYED_TOKEN}"}},
		{server: "gh", seat: "floating", own: map[string]string{"GH_TOKEN": "${FLOAT_TOKEN}"}},
	}
	got := c.Instances()
	if len(got) != len(wants) {
		for _, in := range got {
			t.Logf("%s %q", in.Server.Name, in.Seat)
		}
		t.Fatalf("%d instances, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		in := got[i]
		if in.Server.Name != w.server || in.Seat != w.seat {
			t.Errorf("instance %d: %s for %q, want %s for %q", i, in.Server.Name, in.Seat, w.server, w.seat)
			continue
		}
		if w.seat == "" {
			if in.Block != nil {
				t.Errorf("shared %s has a seat block %+v", w.server, in.Block)
			}
			continue
		}
		if in.Block == nil || !maps.Equal(in.Block.Unit, w.unit) || !maps.Equal(in.Block.Seat, w.own) {
			t.Errorf("%s for %s: block %+v, want unit %v own %v", w.server, w.seat, in.Block, w.unit, w.own)
		}
	}
}
