package tracker

import (
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// TRK-4: an item wakes the seats it is put in front of: whom it is handed
// to and whom its description names, when it is filed, and whom a new
// description names; never its writer. Trigger reads back what woke each.
func TestItemWakesAndTriggers(t *testing.T) {
	h := newHarness(t)
	key := h.ok(ada, "create_work_item", map[string]any{"title": "Fix the login", "assignee": "alan",
		"description": "Broken since Monday; @grace knows the history, @ada filed it."})["key"].(string)
	woken := func() []string {
		var out []string
		for _, w := range h.wakes() {
			if w.Subject == key {
				out = append(out, w.Seat)
			}
		}
		return out
	}
	if got := woken(); !slices.Equal(got, []string{"alan", "grace"}) {
		t.Fatalf("woken on create: %v", got)
	}
	h.ok(ada, "update_work_item", map[string]any{"key": key, "description": "@grace knows; @linus too."})
	if got := woken(); !slices.Equal(got, []string{"alan", "grace", "linus"}) {
		t.Fatalf("woken after the description changed: %v", got)
	}
	rows := h.wakes()
	trig, err := Trigger(h.node, rows[0])
	if err != nil || !strings.Contains(trig.About, "handed to you") || !strings.Contains(trig.Text, "Fix the login") || trig.Author.Seat != "ada" {
		t.Fatalf("the assignee's trigger: %+v %v", trig, err)
	}
	trig, _ = Trigger(h.node, rows[1])
	if !strings.Contains(trig.About, "names you") {
		t.Fatalf("a mention's trigger: %+v", trig)
	}
	out := h.ok(ada, "comment_on_work_item", map[string]any{"key": key, "body": "@alan any news?"})
	rows = h.wakes()
	last := rows[len(rows)-1]
	trig, err = Trigger(h.node, last)
	if err != nil || last.Comment != num(out["comment_id"]) || trig.Text != "@alan any news?" ||
		trig.Author.Kind != authority.KindHuman || !strings.Contains(trig.About, "a comment on "+key) {
		t.Fatalf("a comment's trigger: %+v %+v %v", last, trig, err)
	}
}
