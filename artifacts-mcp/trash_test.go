package artifacts

import (
	"context"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// ART-4: a person's trash fills and empties as the authority table says.
// The owner puts an artifact in it; an editor, an agent (its own artifact
// or not) and somebody with no relation may not, the last told it does
// not exist. Once there it serves nothing and takes no write, naming the
// trash and its owner; the owner's trash lists it, an administrator's
// too, an editor's not. Restored, it reads and takes writes again.
func TestPersonsTrashFillsAndEmpties(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.create(ada, "Old", "<p>old</p>")
	keep := h.create(grace, "Kept", "<p>kept</p>")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "editor"})
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "editor"})

	for _, c := range []struct {
		who   authority.Caller
		class authority.Class
		says  string
	}{
		{grace, authority.Forbidden, "for its owner or an administrator"},
		{alan, authority.Forbidden, "no agent makes it"},
		{bob, authority.NotFound, `No artifact has the id "` + id + `"`},
	} {
		err := h.store.Trash(ctx, c.who, id)
		if r := authority.AsRefusal(err); err == nil || r.Class != c.class || !strings.Contains(r.Sentence, c.says) {
			t.Fatalf("@%s put it in the trash: %v", c.who.Seat, err)
		}
	}
	if list, _, _ := h.store.TrashOf(ctx, ada); len(list) != 0 {
		t.Fatalf("the trash holds %v before anything went in", list)
	}

	if err := h.store.Trash(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	// Reads and writes of it are refused, by tool, naming the trash and
	// its owner.
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"get_artifact", map[string]any{"id": id}},
		{"read_artifact_data", map[string]any{"id": id}},
		{"update_artifact", map[string]any{"id": id, "title": "New"}},
	} {
		r := h.Refused(grace, call.tool, call.args, authority.Forbidden)
		mustContain(t, r.Sentence, id+" is in the trash", "until a person restores it", "@ada")
	}
	if _, err := h.store.Open(ctx, grace, id, ""); !errIs(err, authority.Forbidden) {
		t.Fatalf("the file route served a trashed artifact: %v", err)
	}
	r := h.Refused(ada, "share_artifact", map[string]any{"id": id, "to": "bob"}, authority.Forbidden)
	mustContain(t, r.Sentence, id+" is in the trash")
	// A trashed artifact changes hands no more than it takes a write.
	if err := h.store.Transfer(ctx, ada, id, "grace"); !errIs(err, authority.Forbidden) {
		t.Fatalf("a trashed artifact was transferred: %v", err)
	}

	trashOf := func(c authority.Caller) []string {
		t.Helper()
		list, more, err := h.store.TrashOf(ctx, c)
		if err != nil || more != 0 {
			t.Fatalf("the trash of @%s: %v (%d more)", c.Seat, err, more)
		}
		var ids []string
		for _, a := range list {
			if a.Owner != "ada" || a.TrashedBy != "ada" || a.Title != "Old" || a.TrashedAt.IsZero() {
				t.Errorf("trash row %+v", a)
			}
			ids = append(ids, a.ID)
		}
		return ids
	}
	for who, want := range map[authority.Caller]int{ada: 1, root: 1, grace: 0, bob: 0} {
		if got := trashOf(who); len(got) != want || (want == 1 && got[0] != id) {
			t.Errorf("the trash of @%s: %v, want %d", who.Seat, got, want)
		}
	}

	// Only its owner or an administrator takes it out.
	if err := h.store.Restore(ctx, grace, id); !errIs(err, authority.Forbidden) {
		t.Fatalf("an editor restored it: %v", err)
	}
	if err := h.store.Restore(ctx, ada, keep); !errIs(err, authority.NotFound) {
		t.Fatalf("restoring somebody else's artifact ada has no relation to: %v", err)
	}
	if err := h.store.Restore(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	h.OK(grace, "get_artifact", map[string]any{"id": id})
	h.OK(grace, "update_artifact", map[string]any{"id": id, "title": "Old, again"})
	if got := trashOf(ada); len(got) != 0 {
		t.Fatalf("the trash after the restore: %v", got)
	}
	if err := h.store.Restore(ctx, ada, id); !errIs(err, authority.Invalid) {
		t.Fatalf("restoring what is not in the trash: %v", err)
	}
}

// ART-4: a purge is the owner's or an administrator's, of what is in the
// trash only, with a reason that is one line of its record; purged, the
// artifact is an id nothing holds, to its owner as to everybody.
func TestPurge(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.create(ada, "Draft", "<p>draft</p>")
	other := h.create(grace, "Grace's", "<p>hers</p>")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "editor"})
	if err := h.store.Purge(ctx, ada, id, "done with it"); !errIs(err, authority.Invalid) {
		t.Fatalf("a purge of what is not in the trash: %v", err)
	}
	if err := h.store.Trash(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Trash(ctx, grace, other); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Purge(ctx, grace, id, ""); !errIs(err, authority.Forbidden) {
		t.Fatalf("an editor purged it: %v", err)
	}
	if err := h.store.Purge(ctx, alan, id, ""); !errIs(err, authority.NotFound) {
		t.Fatalf("an agent with no share purged it: %v", err)
	}
	long := strings.Repeat("x", MaxPurgeReason+1)
	if err := h.store.Purge(ctx, ada, id, long); !errIs(err, authority.Invalid) || !strings.Contains(err.Error(), "at most 280") {
		t.Fatalf("a reason past the bound: %v", err)
	}
	if err := h.store.Purge(ctx, ada, id, "one\nline"); !errIs(err, authority.Invalid) {
		t.Fatalf("a reason of two lines: %v", err)
	}
	if err := h.store.Purge(ctx, ada, id, "superseded by the Q3 plan"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []authority.Caller{ada, grace} {
		r := h.Refused(c, "get_artifact", map[string]any{"id": id}, authority.NotFound)
		if r.Sentence != authority.ArtifactMissing(id).Sentence {
			t.Fatalf("a purged artifact read by @%s: %q", c.Seat, r.Sentence)
		}
	}
	if err := h.store.Restore(ctx, ada, id); !errIs(err, authority.NotFound) {
		t.Fatalf("a purged artifact restored: %v", err)
	}
	// An administrator purges what is not theirs and was never shared.
	if err := h.store.Purge(ctx, root, other, ""); err != nil {
		t.Fatal(err)
	}
	h.Refused(grace, "get_artifact", map[string]any{"id": other}, authority.NotFound)
}

// ART-4: a transfer hands the ownership to another seat: the owner's or
// an administrator's decision, never an agent's nor an editor's; the
// former owner keeps an editor's share, the new owner shares, trashes and
// transfers it, and the history says who handed it to whom.
func TestTransfer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.create(ada, "Plan", "<p>plan</p>")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "viewer"})
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "editor"})

	if err := h.store.Transfer(ctx, grace, id, "grace"); !errIs(err, authority.Forbidden) {
		t.Fatalf("a viewer took it: %v", err)
	}
	if err := h.store.Transfer(ctx, alan, id, "grace"); !errIs(err, authority.Forbidden) {
		t.Fatalf("an agent handed it on: %v", err)
	}
	if err := h.store.Transfer(ctx, bob, id, "bob"); !errIs(err, authority.NotFound) {
		t.Fatalf("somebody with no relation took it: %v", err)
	}
	if err := h.store.Transfer(ctx, ada, id, "nobody"); !errIs(err, authority.Invalid) {
		t.Fatalf("a transfer to no seat: %v", err)
	}
	if err := h.store.Transfer(ctx, ada, id, "ada"); !errIs(err, authority.Invalid) {
		t.Fatalf("a transfer to its own owner: %v", err)
	}

	if err := h.store.Transfer(ctx, ada, id, "@grace"); err != nil {
		t.Fatal(err)
	}
	got := h.OK(grace, "get_artifact", map[string]any{"id": id})
	art := asMap(got["artifact"])
	if got["role"] != "owner" || art["owner"] != "grace" {
		t.Fatalf("after the transfer grace reads %v as %v", art["owner"], got["role"])
	}
	if role := h.OK(ada, "get_artifact", map[string]any{"id": id})["role"]; role != "editor" {
		t.Fatalf("the former owner's role: %v", role)
	}
	mustContain(t, textOf(h.Raw(grace, "get_artifact", map[string]any{"id": id})), "ownership transferred from @ada to @grace")
	// Ada holds no more than an editor's role: the owner's decisions are
	// grace's now.
	if err := h.store.Trash(ctx, ada, id); !errIs(err, authority.Forbidden) {
		t.Fatalf("the former owner trashed it: %v", err)
	}
	h.OK(grace, "share_artifact", map[string]any{"id": id, "to": "bob"})

	// An administrator hands an agent's artifact to a person.
	mine := h.create(alan, "Alan's", "<p>mine</p>")
	if err := h.store.Transfer(ctx, grace, mine, "grace"); !errIs(err, authority.NotFound) {
		t.Fatalf("grace took an artifact she has no relation to: %v", err)
	}
	if err := h.store.Transfer(ctx, root, mine, "ada"); err != nil {
		t.Fatal(err)
	}
	if role := h.OK(ada, "get_artifact", map[string]any{"id": mine})["role"]; role != "owner" {
		t.Fatalf("ada's role on what root handed her: %v", role)
	}
}
