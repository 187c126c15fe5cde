package tracker

import (
	"fmt"
	"testing"

	"github.com/crewlet/hub/authority"
)

// OPS-3: where the board names a person, their inbox has an entry: a
// mention, a question put to them, an item handed to them; never their
// own doing. Only they list it and mark it read.
func TestInboxEntries(t *testing.T) {
	h := newHarness(t)
	key := h.ok(grace, "create_work_item", map[string]any{"title": "Rollout", "project": "OPS"})["key"].(string)
	h.ok(grace, "comment_on_work_item", map[string]any{"key": key, "body": "@ada please look, and @grace notes it"})
	h.ok(grace, "update_work_item", map[string]any{"key": key, "assignee": "ada"})
	h.ok(grace, "create_work_item", map[string]any{"title": "Which region?", "project": "OPS", "assignee": "ada", "ask": "eu or us?"})

	in := h.ok(ada, "list_inbox", nil)
	entries := in["entries"].([]any)
	if num(in["unread"]) != 3 || len(entries) != 3 || num(in["ceiling"]) != inboxCeiling {
		t.Fatalf("ada's inbox: %v", in)
	}
	var reasons []string
	for _, e := range entries {
		reasons = append(reasons, e.(map[string]any)["reason"].(string))
	}
	if fmt.Sprint(reasons) != "[asked assigned mentioned]" {
		t.Fatalf("reasons, newest first: %v", reasons)
	}
	if own := h.ok(grace, "list_inbox", nil); len(own["entries"].([]any)) != 0 {
		t.Fatalf("grace's own doing is in her inbox: %v", own)
	}

	first := entries[2].(map[string]any)["id"].(string)
	if out := h.ok(ada, "mark_inbox_read", map[string]any{"ids": []string{first}}); num(out["marked"]) != 1 || num(out["unread"]) != 2 {
		t.Fatalf("mark one: %v", out)
	}
	if unread := h.ok(ada, "list_inbox", map[string]any{"unread_only": true})["entries"].([]any); len(unread) != 2 {
		t.Fatalf("unread only: %v", unread)
	}
	// An entry that is none of hers is not found, whoever's it is.
	h.refused(grace, "mark_inbox_read", map[string]any{"ids": []string{first}}, authority.NotFound)
	h.refused(ada, "mark_inbox_read", map[string]any{"ids": []string{"in_nope"}}, authority.NotFound)
	h.refused(ada, "mark_inbox_read", map[string]any{}, authority.Invalid)
	h.refused(ada, "mark_inbox_read", map[string]any{"ids": []string{first}, "all": true}, authority.Invalid)
	if out := h.ok(ada, "mark_inbox_read", map[string]any{"all": true}); num(out["marked"]) != 2 || num(out["unread"]) != 0 {
		t.Fatalf("mark all: %v", out)
	}
	for _, tool := range []string{"list_inbox", "mark_inbox_read", "pin_work_item"} {
		args := map[string]any{"all": true}
		switch tool {
		case "list_inbox":
			args = nil
		case "pin_work_item":
			args = map[string]any{"key": key}
		}
		h.refused(alan, tool, args, authority.Forbidden)
		h.refused(ciBot, tool, args, authority.Forbidden)
	}
}

// OPS-3, REF-2: pins share the inbox list's ceiling with its unread
// entries: at the ceiling a pin is refused inbox_full, entries arriving
// are counted and not kept, and marking older entries read makes room.
func TestInboxFull(t *testing.T) {
	h := newHarness(t)
	key := h.ok(grace, "create_work_item", map[string]any{"title": "Noisy", "project": "OPS"})["key"].(string)
	other := h.ok(grace, "create_work_item", map[string]any{"title": "Quiet", "project": "OPS"})["key"].(string)
	if out := h.ok(ada, "pin_work_item", map[string]any{"key": other}); out["pinned"] != true || num(out["pins"]) != 1 {
		t.Fatalf("pin: %v", out)
	}
	if out := h.ok(ada, "pin_work_item", map[string]any{"key": other}); out["outcome"] != "unchanged" {
		t.Fatalf("a pin pinned again: %v", out)
	}
	for i := range inboxCeiling {
		h.ok(grace, "comment_on_work_item", map[string]any{"key": key, "body": fmt.Sprintf("@ada ping %d", i)})
	}
	in := h.ok(ada, "list_inbox", nil)
	if num(in["unread"]) != inboxCeiling-1 || num(in["missed"]) != 1 {
		t.Fatalf("at the ceiling: unread %v missed %v", in["unread"], in["missed"])
	}
	mustContain(t, in["note"].(string), "1 entries arrived")
	r := h.refused(ada, "pin_work_item", map[string]any{"key": key}, authority.InboxFull)
	mustContain(t, r.Sentence, "Mark older entries read")
	// Unpinning is never refused, and frees a place.
	h.ok(ada, "pin_work_item", map[string]any{"key": other, "unpin": true})
	h.ok(ada, "pin_work_item", map[string]any{"key": key})
	h.refused(ada, "pin_work_item", map[string]any{"key": other}, authority.InboxFull)
	h.ok(ada, "mark_inbox_read", map[string]any{"all": true})
	h.ok(ada, "pin_work_item", map[string]any{"key": other})
	if pins := h.ok(ada, "list_inbox", nil)["pinned"].([]any); len(pins) != 2 {
		t.Fatalf("pins: %v", pins)
	}
	h.refused(ada, "pin_work_item", map[string]any{"key": "OPS-999"}, authority.NotFound)
}
