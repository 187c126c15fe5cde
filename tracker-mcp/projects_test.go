package tracker

import (
	"testing"

	"github.com/crewlet/hub/authority"
)

// TRK-3: projects, the catalogue and the activity feed.
func TestProjectsCatalogueActivity(t *testing.T) {
	h := newHarness(t)
	ps := h.ok(alan, "list_projects", map[string]any{})["projects"].([]any)
	if len(ps) != 2 || ps[0].(map[string]any)["key"] != "CORE" || ps[0].(map[string]any)["yours"] != true || ps[1].(map[string]any)["lead"] != "grace" {
		t.Fatalf("projects %v", ps)
	}
	h.ok(alan, "create_work_item", map[string]any{"title": "One"})
	p := h.ok(alan, "get_project", map[string]any{})
	if p["key"] != "CORE" || num(p["items_by_status"].(map[string]any)["todo"]) != 1 {
		t.Fatalf("project %v", p)
	}
	h.refused(alan, "get_project", map[string]any{"project": "NOPE"}, authority.NotFound)
	// Anybody may add a label; removing one is the lead's.
	h.ok(alan, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug", "ux"}})
	h.refused(alan, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug"}}, authority.Forbidden)
	h.ok(ada, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug"}, "name": "Core platform"})
	h.refused(ada, "write_project", map[string]any{"project": "CORE", "default_assignee": "ghost"}, authority.Invalid)

	cat := h.ok(alan, "get_work_catalogue", map[string]any{})
	if len(cat["statuses"].([]any)) != 5 || len(cat["priorities"].([]any)) != 5 {
		t.Fatalf("catalogue %v", cat)
	}
	statuses := []map[string]any{{"key": "todo", "name": "To do", "category": "open"}, {"key": "done", "name": "Done", "category": "done"}}
	w := h.ok(ada, "write_work_catalogue", map[string]any{"statuses": statuses, "priorities": []string{"low", "high"}})
	if w["outcome"] != "applied" || num(w["version"]) != 1 {
		t.Fatalf("catalogue write %v", w)
	}
	h.ok(alan, "update_work_item", map[string]any{"key": "CORE-1", "status": "done"})
	r := h.refused(ada, "write_work_catalogue", map[string]any{"statuses": []map[string]any{{"key": "todo", "name": "To do", "category": "open"}, {"key": "shipped", "name": "Shipped", "category": "done"}}, "priorities": []string{"low"}}, authority.Invalid)
	mustContain(t, r.Sentence, "done")
	h.refused(ada, "write_work_catalogue", map[string]any{"statuses": []map[string]any{{"key": "todo", "name": "To do", "category": "open"}}, "priorities": []string{"low"}}, authority.Invalid)
	h.refused(turnOf(alan, "t2"), "update_work_item", map[string]any{"key": "CORE-1", "status": "in_progress"}, authority.Invalid)

	feed := h.ok(ada, "list_activity", map[string]any{"item": "CORE-1"})["activity"].([]any)
	if len(feed) != 2 || feed[0].(map[string]any)["action"] != "updated" || feed[1].(map[string]any)["action"] != "created" {
		t.Fatalf("feed %v", feed)
	}
	one := h.ok(ada, "get_activity", map[string]any{"id": feed[1].(map[string]any)["id"]})
	if one["activity"].(map[string]any)["item"] != "CORE-1" || one["provenance"] == nil {
		t.Fatalf("activity %v", one)
	}
	page := h.ok(ada, "list_activity", map[string]any{"limit": 1})
	if len(page["activity"].([]any)) != 1 || page["next_cursor"] == nil {
		t.Fatalf("page %v", page)
	}
	next := h.ok(ada, "list_activity", map[string]any{"limit": 1, "cursor": page["next_cursor"]})
	if next["activity"].([]any)[0].(map[string]any)["id"] == page["activity"].([]any)[0].(map[string]any)["id"] {
		t.Fatal("the next page repeated the first")
	}
}

// OPS-4: history and activity say who wrote and, for a person's write on
// the operator surface, the credential it came through; a seat's own
// write names none.
func TestAttributionNamesTheCredential(t *testing.T) {
	h := newHarness(t)
	key := h.ok(ada, "create_work_item", map[string]any{"title": "Attributed"})["key"]
	h.ok(ciBot, "update_work_item", map[string]any{"key": key, "priority": "high"})
	h.ok(alan, "update_work_item", map[string]any{"key": key, "status": "in_progress"})
	hist := h.ok(ada, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)["history"].([]any)
	want := [][2]string{{"ada", "laptop"}, {"token:ci", "ci"}, {"alan", ""}}
	if len(hist) != len(want) {
		t.Fatalf("history %v", hist)
	}
	for i, w := range want {
		row := hist[i].(map[string]any)
		if row["by"] != w[0] || (row["operator_id"] != nil && row["operator_id"] != w[1]) || (w[1] != "" && row["operator_id"] != w[1]) {
			t.Errorf("history row %d %v, want by %s operator_id %q", i, row, w[0], w[1])
		}
	}
	feed := h.ok(ada, "list_activity", map[string]any{"item": key})["activity"].([]any)
	if len(feed) != 3 || feed[1].(map[string]any)["operator_id"] != "ci" || feed[2].(map[string]any)["operator_id"] != "laptop" || feed[0].(map[string]any)["operator_id"] != nil {
		t.Fatalf("activity %v", feed)
	}
}
