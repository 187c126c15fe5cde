package knowledge

import (
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state/statetest"
)

// WR-2, WR-5, OPS-5 for pages: a lost acknowledgement answers unknown
// with no id or version, the seat's same call again lands once, and an
// operator finishes the write with the op_id it was told.
func TestPageWriteContract(t *testing.T) {
	h := newHarness(t)
	h.log.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	args := map[string]any{"title": "Lost in transit", "body": "x"}
	r := h.Refused(alan, "write_page", args, authority.Unavailable)
	mustContain(t, r.Sentence, `The page "Lost in transit" may or may not have landed`, "exactly the same write_page call")
	if r.Data["outcome"] != "unknown" || r.Data["id"] != nil || r.Data["version"] != nil {
		t.Fatalf("refusal data %v", r.Data)
	}
	again := h.OK(alan, "write_page", args)
	if again["outcome"] != "applied" || again["id"] != "pg_1" {
		t.Fatalf("the repeat answered %v", again)
	}
	if list := h.OK(ada, "list_pages", map[string]any{})["pages"].([]any); len(list) != 1 {
		t.Fatalf("%d pages after the repeat, want 1", len(list))
	}

	h.log.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	op := h.Refused(ada, "save_page", map[string]any{"id": "pg_1", "version": 1, "body": "y"}, authority.Unavailable)
	id := op.Data["op_id"].(string)
	mustContain(t, op.Sentence, "op_id "+id)
	done := h.OK(ada, "save_page", map[string]any{"id": "pg_1", "version": 1, "body": "y", "op_id": id})
	if done["outcome"] != "applied" || num(done["version"]) != 2 || done["op_id"] != id {
		t.Fatalf("finishing with the op_id answered %v", done)
	}
	h.Refused(ada, "save_page", map[string]any{"id": "pg_1", "version": 2, "body": "z", "op_id": id}, authority.Invalid)
}
