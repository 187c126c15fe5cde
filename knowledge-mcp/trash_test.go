package knowledge

import (
	"context"
	"errors"
	"slices"
	"strings"
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

// ART-4: a page goes in the trash from the dashboard (Store.Trash) — the
// lead of its space's, an administrator's or its maker's decision, never
// a colleague's or a seat's. There it is read by nobody and takes no
// write, each refused forbidden naming the trash and who may take it
// out; a person's trash lists what they may restore, and restored, the
// page reads and takes edits again.
func TestTrashFromTheDashboard(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	st := NewStore(Deps{Node: h.node, Directory: testDirectory})
	runbook := h.write(alan, map[string]any{"title": "Runbook", "body": "Step one."})
	notes := h.write(grace, map[string]any{"title": "Grace's notes", "body": "Mine.", "container": "CORE"})

	for _, c := range []struct {
		who  authority.Caller
		says string
	}{
		{grace, "for the lead of CORE (ada), an administrator, or @alan, who made it"},
		{alan, "not seats"},
	} {
		_, err := st.Trash(ctx, c.who, runbook)
		if r := authority.AsRefusal(err); err == nil || r.Class != authority.Forbidden || !strings.Contains(r.Sentence, c.says) {
			t.Fatalf("@%s put the runbook in the trash: %v", c.who.Seat, err)
		}
	}
	if _, err := st.Trash(ctx, ada, "pg_nope"); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("trashing a page nobody has: %v", err)
	}
	if out, err := st.Trash(ctx, ada, runbook); err != nil || out.Outcome != "applied" || out.Title != "Runbook" {
		t.Fatalf("the lead trashed the runbook: %+v %v", out, err)
	}
	if out, err := st.Trash(ctx, grace, notes); err != nil || out.Outcome != "applied" {
		t.Fatalf("grace trashed the page she made: %+v %v", out, err)
	}
	if out, err := st.Trash(ctx, ada, runbook); err != nil || out.Outcome == "applied" {
		t.Fatalf("trashing it again: %+v %v", out, err)
	}

	// Nothing of it is read or written.
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"get_page", map[string]any{"id": runbook}},
		{"save_page", map[string]any{"id": runbook, "version": 2, "body": "Step two."}},
		{"comment_on_page", map[string]any{"id": runbook, "body": "Still current?"}},
	} {
		r := h.Refused(ada, call.tool, call.args, authority.Forbidden)
		mustContain(t, r.Sentence, runbook+" is in the trash", "until a person restores it", "restore_from_trash", "the lead of CORE", "@ada, who put it there")
	}

	// A person's trash is what they may take out: ada leads CORE, grace
	// put only her notes there.
	trashOf := func(c authority.Caller) []string {
		t.Helper()
		rows, more, err := st.TrashOf(ctx, c)
		if err != nil || more != 0 {
			t.Fatalf("the trash of @%s: %v", c.Seat, err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		tool := refIDs(h.OK(c, "list_trash", nil)["pages"])
		if !slices.Equal(ids, tool) {
			t.Fatalf("the store lists %v, list_trash %v", ids, tool)
		}
		slices.Sort(ids)
		return ids
	}
	want := []string{runbook, notes}
	slices.Sort(want)
	if got := trashOf(ada); !slices.Equal(got, want) {
		t.Fatalf("ada's trash: %v, want %v", got, want)
	}
	if got := trashOf(grace); !slices.Equal(got, []string{notes}) {
		t.Fatalf("grace's trash: %v", got)
	}
	h.Refused(grace, "restore_from_trash", map[string]any{"id": runbook}, authority.Forbidden)

	if out := h.OK(ada, "restore_from_trash", map[string]any{"id": runbook}); out["outcome"] != "applied" {
		t.Fatalf("the restore: %v", out)
	}
	page := h.page(runbook)
	if page["body"] == nil || !strings.Contains(page["body"].(string), "Step one.") {
		t.Fatalf("the restored page reads %v", page["body"])
	}
	h.OK(ada, "save_page", map[string]any{"id": runbook, "version": page["version"], "body": "Step two."})
	h.OK(grace, "comment_on_page", map[string]any{"id": runbook, "body": "Still current?"})
}
