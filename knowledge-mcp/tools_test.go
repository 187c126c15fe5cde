package knowledge

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/toolsnap"
)

// KB-1: the knowledge base's tool surface, frozen in testdata/toolsnaps,
// the rules every first-party tool keeps, and its own: reads are read-only
// and deliver nowhere, writes deliver to the knowledge base (WR-9); the
// trash's two are operator-only (OPS-3).
func TestToolSurface(t *testing.T) {
	h := newHarness(t)
	lt, err := h.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	table := Tools(Deps{})
	if len(lt.Tools) != len(table) || len(table) != 8 {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(table))
	}
	reads := []string{"list_pages", "get_page", "search_knowledge", "list_trash"}
	for _, tool := range table {
		if slices.Contains(reads, tool.Name) {
			if tool.Hints.ReadOnly != servers.Yes || tool.Delivers != "" {
				t.Errorf("%s: read hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
			}
		} else if tool.Hints.ReadOnly != servers.No || tool.Delivers != Delivers {
			t.Errorf("%s: write hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
		}
		if trash := tool.Name == "list_trash" || tool.Name == "restore_from_trash"; tool.OperatorOnly != trash {
			t.Errorf("%s: operator-only %v", tool.Name, tool.OperatorOnly)
		}
	}
	for _, tool := range lt.Tools {
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}
