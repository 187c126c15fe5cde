package knowledge

import (
	"context"
	"testing"

	"github.com/crewlet/hub/authority"
)

// trash puts a page in the trash as by would: no tool does, the dashboard
// does (OPS-3).
func (h *harness) trash(by authority.Caller, id string) {
	h.t.Helper()
	op := stateOp(kindTrash, trashPayload{ID: id})
	op.Caller = by
	if _, err := h.node.Write(context.Background(), op); err != nil {
		h.t.Fatal(err)
	}
}

// OPS-3: people list the trash; a page in it is restored by its space's
// lead, an administrator or whoever put it there, and by nobody else; no
// seat reaches the trash.
func TestTrashAuthority(t *testing.T) {
	h := newHarness(t)
	id := h.write(alan, map[string]any{"title": "Runbook", "body": "Step one."})
	other := h.write(alan, map[string]any{"title": "Old notes", "body": "Stale."})
	ops := h.write(grace, map[string]any{"title": "Pager", "body": "Who is on call.", "container": "OPS"})
	h.trash(grace, id)
	h.trash(grace, other)
	h.trash(ada, ops)

	list := h.OK(ada, "list_trash", nil)["pages"].([]any)
	if len(list) != 3 {
		t.Fatalf("the trash: %v", list)
	}
	core := h.OK(grace, "list_trash", map[string]any{"container": "core"})["pages"].([]any)
	if len(core) != 2 || core[0].(map[string]any)["trashed_by"] != "grace" {
		t.Fatalf("the CORE trash: %v", core)
	}
	h.Refused(ada, "list_trash", map[string]any{"container": "NOWHERE"}, authority.Invalid)
	h.Refused(ada, "list_trash", map[string]any{"container": "agent_diary"}, authority.Forbidden)
	h.Refused(alan, "list_trash", nil, authority.Forbidden)

	// Grace does not lead CORE, but she put the runbook in the trash, so
	// she may take it out.
	if out := h.OK(grace, "restore_from_trash", map[string]any{"id": id}); out["outcome"] != "applied" || out["title"] != "Runbook" {
		t.Fatalf("restore by whoever trashed it: %v", out)
	}
	// Ada leads CORE; grace leads OPS, where ada trashed the pager.
	h.OK(ada, "restore_from_trash", map[string]any{"id": other})
	h.OK(grace, "restore_from_trash", map[string]any{"id": ops})
	h.trash(ada, ops)
	// Neither the lead of OPS's space nor the one who trashed it.
	root := authority.Caller{Seat: "token:ops", Kind: authority.KindOperator, Requester: "token:ops", OperatorID: "ops"}
	r := h.Refused(root, "restore_from_trash", map[string]any{"id": ops}, authority.Forbidden)
	mustContain(t, r.Sentence, "lead of OPS (grace)")
	h.Refused(alan, "restore_from_trash", map[string]any{"id": ops}, authority.Forbidden)
	root.Admin = true
	h.OK(root, "restore_from_trash", map[string]any{"id": ops})

	h.Refused(ada, "restore_from_trash", map[string]any{"id": id}, authority.Invalid)
	h.Refused(ada, "restore_from_trash", map[string]any{"id": "pg_nope"}, authority.NotFound)
	if left := h.OK(ada, "list_trash", nil)["pages"].([]any); len(left) != 0 {
		t.Fatalf("left in the trash: %v", left)
	}
	// A restored page takes edits again.
	page := h.page(id)
	h.OK(ada, "save_page", map[string]any{"id": id, "version": page["version"], "body": "Step two."})
}
