package tracker

import (
	"testing"

	"github.com/crewlet/hub/authority"
)

// OPS-3: a person orders their own queue — the live items assigned to
// them — and nobody else's; a seat and a credential bound to no seat have
// none.
func TestOrderMyQueue(t *testing.T) {
	h := newHarness(t)
	k1 := h.ok(ada, "create_work_item", map[string]any{"title": "First", "assignee": "ada"})["key"].(string)
	k2 := h.ok(ada, "create_work_item", map[string]any{"title": "Second", "assignee": "ada"})["key"].(string)
	k3 := h.ok(ada, "create_work_item", map[string]any{"title": "Third", "assignee": "ada"})["key"].(string)
	theirs := h.ok(ada, "create_work_item", map[string]any{"title": "Grace's", "assignee": "grace"})["key"].(string)
	done := h.ok(ada, "create_work_item", map[string]any{"title": "Done", "assignee": "ada", "status": "done"})["key"].(string)

	out := h.ok(ada, "order_my_queue", map[string]any{"keys": []string{k1}})
	var got []string
	for _, s := range out["queue"].([]any) {
		got = append(got, s.(map[string]any)["key"].(string))
	}
	// The named first, then the rest newest first; a closed item is no
	// longer in the queue.
	if want := []string{k1, k3, k2}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("queue %v, want %v", got, want)
	}
	for name, keys := range map[string][]string{
		"somebody else's": {theirs},
		"closed":          {done},
		"no item":         {"CORE-999"},
		"twice":           {k1, k1},
	} {
		t.Run(name, func(t *testing.T) {
			h.refused(ada, "order_my_queue", map[string]any{"keys": keys}, authority.Invalid)
		})
	}
	h.refused(alan, "order_my_queue", map[string]any{"keys": []string{}}, authority.Forbidden)
	r := h.refused(ciBot, "order_my_queue", map[string]any{"keys": []string{}}, authority.Forbidden)
	mustContain(t, r.Sentence, "bound to no seat")
	// Grace orders her own queue, which holds her item only.
	if q := h.ok(grace, "order_my_queue", map[string]any{"keys": []string{theirs}})["queue"].([]any); len(q) != 1 {
		t.Fatalf("grace's queue: %v", q)
	}
}
