package tracker

import (
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state/statetest"
)

// WR-8: an update whose own change is unknown writes none of its link
// changes; the same call again answers the change and then writes them, and
// the version answered is the item's own newest.
func TestUpdateWithDependencies(t *testing.T) {
	h := newHarness(t)
	a := h.ok(alan, "create_work_item", map[string]any{"title": "Needs the schema"})["key"].(string)
	b := h.ok(alan, "create_work_item", map[string]any{"title": "The schema"})["key"].(string)
	c := h.ok(alan, "create_work_item", map[string]any{"title": "The migration"})["key"].(string)
	args := map[string]any{"key": a, "status": "in_progress", "add_links": []map[string]any{{"kind": "waiting_on", "key": b}, {"kind": "waiting_on", "key": c}}}

	h.drop(1)
	r := h.refused(alan, "update_work_item", args, authority.Unavailable)
	mustContain(t, r.Sentence, "may or may not have landed", "None of the 2 link changes")
	if _, ok := r.Data["version"]; ok {
		t.Fatal("an unknown update answered a version")
	}
	bItem := h.ok(alan, "get_work_item", map[string]any{"key": b})["item"].(map[string]any)
	if bItem["links"] != nil || num(bItem["version"]) != 1 {
		t.Fatalf("a link change was written after an unknown item change: %v", bItem)
	}

	out := h.ok(alan, "update_work_item", args)
	got := h.ok(alan, "get_work_item", map[string]any{"key": a})["item"].(map[string]any)
	if num(out["version"]) != num(got["version"]) || num(got["version"]) != 4 || num(out["links_changed"]) != 2 {
		t.Fatalf("update answered version %v, item is at %v: %v", out["version"], got["version"], out)
	}
	if got["status"] != "in_progress" || len(got["links"].([]any)) != 2 {
		t.Fatalf("item %v", got)
	}
	bItem = h.ok(alan, "get_work_item", map[string]any{"key": b})["item"].(map[string]any)
	if l := bItem["links"].([]any); len(l) != 1 || l[0].(map[string]any)["kind"] != "blocks" {
		t.Fatalf("inverse link %v", bItem["links"])
	}
	// Repeating the whole call changes nothing more.
	again := h.ok(alan, "update_work_item", args)
	if num(again["version"]) != 4 {
		t.Fatalf("repeat moved the item: %v", again)
	}
	// if_match with the answered version works; the one before it is stale.
	h.ok(alan, "update_work_item", map[string]any{"key": a, "priority": "high", "if_match": num(out["version"])})
	h.refused(alan, "update_work_item", map[string]any{"key": a, "priority": "low", "if_match": num(out["version"])}, authority.StaleVersion)
	for _, f := range []map[string]any{{"priority": "high"}, {"status": "in_progress"}, {"priority": "high", "project": "CORE"}, {"assignee": "ada", "status": "in_progress"}} {
		l := h.ok(alan, "list_work_items", f)["items"].([]any)
		if len(l) != 1 || l[0].(map[string]any)["key"] != a {
			t.Fatalf("list %v answered %v", f, l)
		}
	}
	if l := h.ok(alan, "list_work_items", map[string]any{"status": "todo", "limit": 1}); len(l["items"].([]any)) != 1 || l["next_cursor"] == nil {
		t.Fatalf("first page %v", l)
	} else if l2 := h.ok(alan, "list_work_items", map[string]any{"status": "todo", "limit": 1, "cursor": l["next_cursor"]}); len(l2["items"].([]any)) != 1 || l2["next_cursor"] != nil ||
		l2["items"].([]any)[0].(map[string]any)["key"] == l["items"].([]any)[0].(map[string]any)["key"] {
		t.Fatalf("second page %v after %v", l2, l)
	}
	// Removing a link.
	rm := h.ok(turnOf(alan, "t-rm"), "update_work_item", map[string]any{"key": a, "remove_links": []map[string]any{{"kind": "waiting_on", "key": c}}})
	if num(rm["links_changed"]) != 1 {
		t.Fatalf("remove %v", rm)
	}
}

// A lost acknowledgement on a link change after the item change landed: the
// answer is unknown, names no version, and the repeat writes the rest once.
func TestUpdateLostLinkChange(t *testing.T) {
	h := newHarness(t)
	a := h.ok(alan, "create_work_item", map[string]any{"title": "A"})["key"].(string)
	b := h.ok(alan, "create_work_item", map[string]any{"title": "B"})["key"].(string)
	args := map[string]any{"key": a, "priority": "high", "add_links": []map[string]any{{"kind": "relates_to", "key": b}}}
	// The item change lands; the link change's acknowledgement is lost.
	h.drop(0)
	h.ok(alan, "get_work_item", map[string]any{"key": a})
	// The next append (the item change) is acknowledged; the one after it
	// (the link) is not.
	h.log.Set(func(f *statetest.Faults) { f.Skip, f.DropAfterSkip = 1, 1 })
	r := h.refused(alan, "update_work_item", args, authority.Unavailable)
	mustContain(t, r.Sentence, "Link change 1 of 1", "itself landed")
	out := h.ok(alan, "update_work_item", args)
	got := h.ok(alan, "get_work_item", map[string]any{"key": a})["item"].(map[string]any)
	if num(out["version"]) != num(got["version"]) || len(got["links"].([]any)) != 1 {
		t.Fatalf("answered %v, item %v", out, got)
	}
}
