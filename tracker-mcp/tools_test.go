package tracker

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tool surface, frozen in testdata/toolsnaps, the rules every
// first-party tool keeps, and the tracker's own: reads are read-only and
// deliver nowhere, writes are not read-only and deliver to the tracker.
func TestToolSurface(t *testing.T) {
	h := newHarness(t)
	lt, err := h.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	table := Tools(Deps{})
	if len(lt.Tools) != len(table) || len(table) != 19 {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(table))
	}
	reads := []string{"list_work_items", "get_work_item", "search_work_items", "list_projects", "get_project", "get_work_catalogue", "list_activity", "get_activity", "list_project_files", "read_project_file"}
	for _, tool := range table {
		if slices.Contains(reads, tool.Name) {
			if tool.Hints.ReadOnly != servers.Yes || tool.Delivers != "" {
				t.Errorf("%s: read hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
			}
		} else if tool.Hints.ReadOnly != servers.No || tool.Delivers != Delivers {
			t.Errorf("%s: write hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
		}
	}
	// TRK-6: eighteen tools for seats; the catalogue write is the
	// operator surface's alone, and says so in its listing.
	var operatorOnly []string
	for _, tool := range lt.Tools {
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
		if tool.Meta[servers.MetaAudience] == servers.AudienceOperator {
			operatorOnly = append(operatorOnly, tool.Name)
		}
	}
	if !slices.Equal(operatorOnly, []string{"write_work_catalogue"}) {
		t.Errorf("operator-only tools %v, want [write_work_catalogue]", operatorOnly)
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
	_ = mcp.Tool{}
}
