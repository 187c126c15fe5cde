package knowledge

import (
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// KB-1: a comment on a page, fenced as its writer's when read; one's own
// comment is replaced with edit, somebody else's is not theirs to replace;
// a turn posts once per page; watchers other than the writer are woken.
func TestCommentOnPage(t *testing.T) {
	h := newHarness(t)
	id := h.write(ada, map[string]any{"title": "Policy", "body": "Be kind.", "watch": true})
	c := h.OK(alan, "comment_on_page", map[string]any{"id": id, "body": "Agreed."})
	again := h.OK(alan, "comment_on_page", map[string]any{"id": id, "body": "Agreed, worded differently."})
	if num(c["comment_id"]) != 1 || again["already_posted"] != true || num(again["comment_id"]) != 1 {
		t.Fatalf("once per turn: %v then %v", c, again)
	}
	h.Refused(grace, "comment_on_page", map[string]any{"id": id, "body": "Not yours", "edit": 1}, authority.Forbidden)
	h.Refused(alan, "comment_on_page", map[string]any{"id": id, "body": "x", "edit": 7}, authority.Invalid)
	h.OK(alan, "comment_on_page", map[string]any{"id": id, "body": "Agreed, and noted.", "edit": 1})
	comments := h.page(id)["comments"].([]any)
	body := comments[0].(map[string]any)["body"].(string)
	if len(comments) != 1 || servers.Unfence(body) != "Agreed, and noted." || comments[0].(map[string]any)["edited"] != true {
		t.Fatalf("comments %v", comments)
	}
	mustContain(t, body, "@alan (agent)")
	if w := wakes(t, h); len(w) != 2 || w[0].Seat != "ada" || w[0].Subject != id {
		t.Fatalf("wakes %+v", w)
	}
}
