package tracker

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state/statetest"
)

// TRK-2: project files.
func TestProjectFiles(t *testing.T) {
	h := newHarness(t)
	w := h.ok(alan, "write_project_file", map[string]any{"path": "specs/api.md", "content": "# API\n"})
	if w["outcome"] != "applied" || num(w["version"]) != 1 {
		t.Fatalf("write %v", w)
	}
	same := h.ok(turnOf(alan, "t2"), "write_project_file", map[string]any{"path": "specs/api.md", "content": "# API\n"})
	if same["outcome"] != "unchanged" || num(same["version"]) != 1 {
		t.Fatalf("identical write %v", same)
	}
	h.refused(turnOf(alan, "t3"), "write_project_file", map[string]any{"path": "specs/api.md", "content": "# API v2\n", "if_version": 7}, authority.StaleVersion)
	h.ok(turnOf(alan, "t4"), "write_project_file", map[string]any{"path": "specs/api.md", "content": "# API v2\n", "if_version": 1})
	h.refused(alan, "write_project_file", map[string]any{"path": "../etc/passwd", "content": "x"}, authority.Invalid)
	big := strings.Repeat("é", 40000) // 80,000 bytes: two pages
	h.ok(alan, "write_project_file", map[string]any{"path": "notes/big.txt", "content": big, "type": "text/plain"})
	h.ok(alan, "write_project_file", map[string]any{"path": "bin/blob", "base64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})})

	list := h.ok(ada, "list_project_files", map[string]any{"project": "CORE"})
	var paths []string
	for _, f := range list["files"].([]any) {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	if !slices.Equal(paths, []string{"bin/blob", "notes/big.txt", "specs/api.md"}) {
		t.Fatalf("paths %v", paths)
	}
	p1 := h.ok(ada, "read_project_file", map[string]any{"project": "CORE", "path": "notes/big.txt"})
	next := num(p1["next_offset"])
	if next == 0 || next%2 != 0 || p1["provenance"] == nil {
		t.Fatalf("page 1 ends at %d", next)
	}
	p2 := h.ok(ada, "read_project_file", map[string]any{"project": "CORE", "path": "notes/big.txt", "offset": next})
	if servers.Unfence(p1["text"].(string))+servers.Unfence(p2["text"].(string)) != big || p2["next_offset"] != nil {
		t.Fatal("two pages do not make the file")
	}
	b := h.ok(ada, "read_project_file", map[string]any{"project": "CORE", "path": "bin/blob", "base64": true})
	if b["base64"] != base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}) {
		t.Fatalf("base64 %v", b)
	}
	h.refused(ada, "read_project_file", map[string]any{"project": "CORE", "path": "bin/blob"}, authority.Invalid)
	h.refused(alan, "remove_project_file", map[string]any{"path": "specs/api.md"}, authority.Forbidden)
	rm := h.ok(ada, "remove_project_file", map[string]any{"path": "specs/api.md"})
	if rm["removed"] != true {
		t.Fatalf("remove %v", rm)
	}
	h.refused(ada, "read_project_file", map[string]any{"path": "specs/api.md"}, authority.NotFound)
	h.refused(ada, "remove_project_file", map[string]any{"path": "specs/api.md"}, authority.NotFound)
}

// TRK-2: remove_project_file deletes the content from storage. Neither the
// removed file's bytes nor those of the version an overwrite replaced are
// anywhere under the data directory afterwards — not in the log, not in the
// projection, not in the blob store's files.
func TestRemovedFileLeavesNoBytes(t *testing.T) {
	h := newHarness(t)
	first, second := "PLANTED-first-version-3b9e", "PLANTED-second-version-81d0"
	h.ok(ada, "write_project_file", map[string]any{"path": "secret/plan.md", "content": "the plan: " + first})
	if len(statetest.Grep(t, h.dir, first)) == 0 {
		t.Fatal("the first version is not under the data directory at all; the test proves nothing")
	}
	out := h.ok(ada, "write_project_file", map[string]any{"path": "secret/plan.md", "content": "the new plan: " + second})
	if num(out["version"]) != 2 {
		t.Fatalf("overwrite answered %v", out)
	}
	if hits := statetest.Grep(t, h.dir, first); len(hits) != 0 {
		t.Fatalf("the overwritten version's bytes are still stored: %v", hits)
	}
	read := h.ok(alan, "read_project_file", map[string]any{"path": "secret/plan.md"})
	mustContain(t, read["text"].(string), second)
	h.ok(ada, "remove_project_file", map[string]any{"path": "secret/plan.md"})
	if hits := statetest.Grep(t, h.dir, second); len(hits) != 0 {
		t.Fatalf("the removed file's bytes are still stored: %v", hits)
	}
	h.refused(alan, "read_project_file", map[string]any{"path": "secret/plan.md"}, authority.NotFound)
}
