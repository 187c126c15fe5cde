package tracker

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// OPS-3: the saved views are every person's to list and save; a view its
// owner protected is theirs alone to rewrite or delete; no seat reaches
// them.
func TestSavedViewsAuthority(t *testing.T) {
	h := newHarness(t)
	// Allowed: a person and an unbound operator credential.
	saved := h.ok(ada, "save_view", map[string]any{"name": "My open work", "assignee": "me", "status": "open", "protected": true})
	if saved["outcome"] != "applied" || saved["owner"] != "ada" || num(saved["version"]) != 1 {
		t.Fatalf("save: %v", saved)
	}
	h.ok(ciBot, "save_view", map[string]any{"name": "Urgent", "priority": "urgent"})
	views := h.ok(ciBot, "list_views", nil)["views"].([]any)
	if len(views) != 2 {
		t.Fatalf("views: %v", views)
	}
	// A protected view is its owner's: somebody else's rewrite and delete
	// are forbidden, naming the owner; the owner's go ahead.
	r := h.refused(grace, "save_view", map[string]any{"name": "my open WORK", "status": "todo"}, authority.Forbidden)
	mustContain(t, r.Sentence, "protected for its owner, ada")
	h.refused(grace, "delete_view", map[string]any{"name": "My open work"}, authority.Forbidden)
	if again := h.ok(ada, "save_view", map[string]any{"name": "My open work", "status": "todo", "protected": true}); num(again["version"]) != 2 {
		t.Fatalf("the owner's rewrite: %v", again)
	}
	// An unprotected view is anybody's to rewrite, and keeps its owner.
	if other := h.ok(grace, "save_view", map[string]any{"name": "Urgent", "priority": "high"}); other["owner"] != "token:ci" || num(other["version"]) != 2 {
		t.Fatalf("a rewrite of an unprotected view: %v", other)
	}
	// Refused: a seat, whatever it asks.
	h.refused(alan, "list_views", nil, authority.Forbidden)
	h.refused(alan, "save_view", map[string]any{"name": "Mine"}, authority.Forbidden)
	h.refused(alan, "delete_view", map[string]any{"name": "Urgent"}, authority.Forbidden)
	// Deleting: the owner's protected view goes; a name no view has is not
	// found.
	h.ok(ada, "delete_view", map[string]any{"name": "my open work"})
	h.refused(ada, "delete_view", map[string]any{"name": "My open work"}, authority.NotFound)
	if views := h.ok(ada, "list_views", nil)["views"].([]any); len(views) != 1 {
		t.Fatalf("after the delete: %v", views)
	}
}

// A view's filter names what the board has; anything else is the
// argument's fault.
func TestSaveViewInvalid(t *testing.T) {
	h := newHarness(t)
	for name, args := range map[string]map[string]any{
		"no name":      {"name": " "},
		"two lines":    {"name": "a\nb"},
		"long name":    {"name": strings.Repeat("x", maxViewName+1)},
		"no status":    {"name": "v", "status": "parked"},
		"no priority":  {"name": "v", "priority": "whenever"},
		"nobody":       {"name": "v", "assignee": "nobody"},
		"long label":   {"name": "v", "label": strings.Repeat("x", maxViewName+1)},
		"long project": {"name": "v", "project": strings.Repeat("x", maxViewName+1)},
	} {
		t.Run(name, func(t *testing.T) { h.refused(ada, "save_view", args, authority.Invalid) })
	}
}

// OPS-4: a view written through the operator surface is in the feed under
// who wrote it and the credential it came through.
func TestSavedViewActivity(t *testing.T) {
	h := newHarness(t)
	h.ok(ada, "save_view", map[string]any{"name": "Mine", "assignee": "me"})
	rows := h.ok(ada, "list_activity", nil)["activity"].([]any)
	row := rows[0].(map[string]any)
	if row["action"] != "view_saved" || row["actor"] != "ada" || row["operator_id"] != "laptop" {
		t.Fatalf("activity: %v", row)
	}
}
