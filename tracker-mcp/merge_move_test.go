package tracker

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/authority"
)

// TRK-1: merge re-parents the duplicate's subtasks and cancels it; move
// re-keys an item and its subtasks, old keys still resolving, and is the
// lead's.
func TestMergeAndMove(t *testing.T) {
	h := newHarness(t)
	surv := h.ok(alan, "create_work_item", map[string]any{"title": "Login broken"})["key"].(string)
	dup := h.ok(alan, "create_work_item", map[string]any{"title": "Cannot log in"})["key"].(string)
	sub := h.ok(alan, "create_work_item", map[string]any{"title": "Check cookies", "parent": dup})["key"].(string)
	out := h.ok(alan, "merge_work_item", map[string]any{"key": dup, "into": surv})
	if out["survivor"] != surv || !slices.Equal(toStrings(out["reparented"]), []string{sub}) {
		t.Fatalf("merge %v", out)
	}
	d := h.ok(alan, "get_work_item", map[string]any{"key": dup})["item"].(map[string]any)
	if d["status"] != "cancelled" || d["merged_into"] != surv {
		t.Fatalf("duplicate %v", d)
	}
	s := h.ok(alan, "get_work_item", map[string]any{"key": surv})["item"].(map[string]any)
	if !slices.Equal(toStrings(s["subtasks"]), []string{sub}) || num(s["version"]) != num(out["version"]) {
		t.Fatalf("survivor %v", s)
	}
	h.refused(turnOf(alan, "m2"), "merge_work_item", map[string]any{"key": surv, "into": "CORE-99"}, authority.Invalid)
	h.refused(turnOf(alan, "m3"), "merge_work_item", map[string]any{"key": "CORE-99", "into": surv}, authority.NotFound)

	h.refused(ada, "move_work_item", map[string]any{"key": sub, "project": "OPS"}, authority.Invalid)
	mv := h.ok(ada, "move_work_item", map[string]any{"key": surv, "project": "OPS"})
	rk := mv["rekeyed"].(map[string]any)
	if mv["key"] != "OPS-1" || rk[surv] != "OPS-1" || rk[sub] != "OPS-2" {
		t.Fatalf("move %v", mv)
	}
	old := h.ok(grace, "get_work_item", map[string]any{"key": sub})["item"].(map[string]any)
	if old["key"] != "OPS-2" || old["parent"] != "OPS-1" || !slices.Contains(toStrings(old["old_keys"]), sub) {
		t.Fatalf("old key resolves to %v", old)
	}
	list := h.ok(grace, "list_work_items", map[string]any{"project": "OPS"})
	if len(list["items"].([]any)) != 2 {
		t.Fatalf("OPS list %v", list)
	}
	if l := h.ok(ada, "list_work_items", map[string]any{"project": "CORE"}); len(l["items"].([]any)) != 1 {
		t.Fatalf("CORE still lists moved items: %v", l)
	}
}
