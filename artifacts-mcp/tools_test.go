package artifacts

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/toolsnap"
)

// ART-1, WR-9: the thirteen tools, frozen in testdata/toolsnaps; reads are
// read-only, and no tool delivers. list_dashboard_sources is registered
// only where the node has sources (CAT-3).
func TestToolSurface(t *testing.T) {
	h := newHarness(t)
	lt, err := h.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"list_artifacts", "get_artifact", "list_dashboard_sources", "create_artifact", "publish_artifact", "update_artifact",
		"share_artifact", "unshare_artifact", "upload_artifact_asset", "read_artifact_data", "query_artifact_data", "write_artifact_data", "set_artifact_schema"}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	reads := []string{"list_artifacts", "get_artifact", "list_dashboard_sources", "read_artifact_data", "query_artifact_data"}
	for _, tool := range Tools(Deps{Sources: sourcesStub{}}) {
		if tool.Delivers != "" || tool.OperatorOnly {
			t.Errorf("%s delivers %q, operator-only %v", tool.Name, tool.Delivers, tool.OperatorOnly)
		}
		if (tool.Hints.ReadOnly == servers.Yes) != slices.Contains(reads, tool.Name) {
			t.Errorf("%s: read-only %v", tool.Name, tool.Hints.ReadOnly)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)

	if n := len(Tools(Deps{})); n != 12 {
		t.Fatalf("without sources the table has %d tools, want 12 (no list_dashboard_sources)", n)
	}
}
