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
	if len(lt.Tools) != len(table) || len(table) != 27 {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(table))
	}
	reads := []string{"list_work_items", "get_work_item", "search_work_items", "list_projects", "get_project", "get_work_catalogue", "list_activity", "get_activity", "list_project_files", "read_project_file", "list_views", "list_inbox"}
	// A person's own writes (their queue, their inbox, their pins) are in
	// front of nobody else.
	personal := []string{"order_my_queue", "mark_inbox_read", "pin_work_item"}
	for _, tool := range table {
		if slices.Contains(personal, tool.Name) {
			if tool.Hints.ReadOnly != servers.No || tool.Delivers != "" {
				t.Errorf("%s: personal write hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
			}
		} else if slices.Contains(reads, tool.Name) {
			if tool.Hints.ReadOnly != servers.Yes || tool.Delivers != "" {
				t.Errorf("%s: read hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
			}
		} else if tool.Hints.ReadOnly != servers.No || tool.Delivers != Delivers {
			t.Errorf("%s: write hints %+v delivers %q", tool.Name, tool.Hints, tool.Delivers)
		}
	}
	// TRK-6, OPS-3: eighteen tools for seats; the catalogue write and a
	// person's views, queue, inbox, pins and board drag are the operator
	// surface's alone, and say so in their listing.
	var operatorOnly []string
	for _, tool := range lt.Tools {
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
		if tool.Meta[servers.MetaAudience] == servers.AudienceOperator {
			operatorOnly = append(operatorOnly, tool.Name)
		}
	}
	want := []string{"delete_view", "list_inbox", "list_views", "mark_inbox_read", "move_on_board", "order_my_queue", "pin_work_item", "save_view", "write_work_catalogue"}
	if !slices.Equal(operatorOnly, want) {
		t.Errorf("operator-only tools %v, want %v", operatorOnly, want)
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
	_ = mcp.Tool{}
}
