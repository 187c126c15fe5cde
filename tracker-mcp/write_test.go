package tracker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// OPS-5: on the operator surface a write answers its op_id; the same call
// with it finishes that operation without a second item; the op_id with
// other arguments, or on another tool, is refused before anything is
// written.
func TestOpIDRoundTrip(t *testing.T) {
	h := newHarness(t)
	args := map[string]any{"title": "From the laptop", "project": "CORE"}
	first := h.ok(ada, "create_work_item", args)
	id, _ := first["op_id"].(string)
	if _, err := state.ParseOpID(id); err != nil {
		t.Fatalf("op_id %q: %v", id, err)
	}
	again := h.ok(ada, "create_work_item", map[string]any{"title": "From the laptop", "project": "CORE", "op_id": id})
	if again["key"] != first["key"] || again["op_id"] != id || num(again["position"]) != num(first["position"]) {
		t.Fatalf("repeat answered %v, first %v", again, first)
	}
	if h.countItems() != 1 {
		t.Fatalf("%d items after a repeat, want 1", h.countItems())
	}
	r := h.refused(ada, "create_work_item", map[string]any{"title": "Something else", "project": "CORE", "op_id": id}, authority.Invalid)
	mustContain(t, r.Sentence, id, "different call")
	h.refused(ada, "comment_on_work_item", map[string]any{"key": first["key"], "body": "hi", "op_id": id}, authority.Invalid)
	if h.countItems() != 1 {
		t.Fatal("a refused op_id wrote something")
	}
	item := h.ok(ada, "get_work_item", map[string]any{"key": first["key"]})["item"].(map[string]any)
	if item["thread"] != nil {
		t.Fatalf("a refused comment was posted: %v", item["thread"])
	}
	// An unbound operator credential is answered its op_id too.
	if op := h.ok(ciBot, "create_work_item", map[string]any{"title": "From CI", "project": "OPS"}); op["op_id"] == nil {
		t.Fatalf("operator credential not answered an op_id: %v", op)
	}
	// An update finished by its op_id is answered from the record, not
	// refused as stale by its own effect.
	upd := h.ok(ada, "update_work_item", map[string]any{"key": first["key"], "status": "in_progress", "if_match": 1})
	upd2 := h.ok(ada, "update_work_item", map[string]any{"key": first["key"], "status": "in_progress", "if_match": 1, "op_id": upd["op_id"]})
	if num(upd2["version"]) != 2 || upd2["outcome"] != "applied" {
		t.Fatalf("finished update answered %v", upd2)
	}
}

// WR-5: a seat's repeat of the same call in the same turn is the same
// operation; another turn, or reworded, is a new one.
func TestSeatRetryIsOneOperation(t *testing.T) {
	h := newHarness(t)
	args := map[string]any{"title": "Retry me"}
	a := h.ok(alan, "create_work_item", args)
	b := h.ok(alan, "create_work_item", args)
	if a["key"] != b["key"] || h.countItems() != 1 {
		t.Fatalf("same turn, same call: %v then %v (%d items)", a, b, h.countItems())
	}
	c := h.ok(turnOf(alan, "turn-2"), "create_work_item", args)
	d := h.ok(alan, "create_work_item", map[string]any{"title": "Retry me, reworded"})
	if c["key"] == a["key"] || d["key"] == a["key"] || h.countItems() != 3 {
		t.Fatalf("another turn or a rewording landed as the first: %v %v", c, d)
	}
	// A fresh server on the same node (a restart of the process serving
	// the tools) derives the same operation for the same turn.
	h.connect(Deps{Node: h.node, Directory: testDirectory, Search: h.ix})
	e := h.ok(alan, "create_work_item", args)
	if e["key"] != a["key"] || h.countItems() != 3 {
		t.Fatalf("after a restart the retry landed again: %v", e)
	}
}

// WR-2, WR-5: a lost acknowledgement answers unknown with no key, id or
// version — only the key the item has if it was filed — and the same call
// again lands once under that key; a reworded call is a new operation.
func TestLostAcknowledgementOnCreate(t *testing.T) {
	h := newHarness(t)
	h.drop(1)
	args := map[string]any{"title": "Lost in transit"}
	r := h.refused(alan, "create_work_item", args, authority.Unavailable)
	mustContain(t, r.Sentence, "may or may not have landed", "If it was filed, the key it has is CORE-1", "not a receipt", "exactly the same", "same arguments")
	if r.Data["outcome"] != "unknown" || r.Data["key_if_filed"] != "CORE-1" || r.Data["op_id"] == nil {
		t.Fatalf("refusal data %v", r.Data)
	}
	for _, k := range []string{"key", "version", "id", "position"} {
		if _, ok := r.Data[k]; ok {
			t.Fatalf("unknown answer carries %s: %v", k, r.Data)
		}
	}
	mustContain(t, r.Sentence, r.Data["op_id"].(string))
	again := h.ok(alan, "create_work_item", args)
	if again["key"] != "CORE-1" || again["outcome"] != "applied" || h.countItems() != 1 {
		t.Fatalf("repeat answered %v with %d items", again, h.countItems())
	}
	other := h.ok(alan, "create_work_item", map[string]any{"title": "Lost in transit (again)"})
	if other["key"] == "CORE-1" || h.countItems() != 2 {
		t.Fatalf("a reworded call was taken for the lost one: %v", other)
	}
}

// OPS-5 with a lost acknowledgement: the operator is told the op_id, and
// sending it back finishes the write once.
func TestLostAcknowledgementOperatorFinishesWithOpID(t *testing.T) {
	h := newHarness(t)
	h.drop(1)
	args := map[string]any{"title": "Filed from the dashboard", "project": "OPS"}
	r := h.refused(grace, "create_work_item", args, authority.Unavailable)
	id := r.Data["op_id"].(string)
	mustContain(t, r.Sentence, "op_id "+id)
	withID := map[string]any{"title": "Filed from the dashboard", "project": "OPS", "op_id": id}
	out := h.ok(grace, "create_work_item", withID)
	if out["key"] != r.Data["key_if_filed"] || out["op_id"] != id || h.countItems() != 1 {
		t.Fatalf("finished create answered %v (unknown named %v), %d items", out, r.Data["key_if_filed"], h.countItems())
	}
}

// Whole-value writes say repeating is harmless, and each call is its own
// operation.
func TestLostAcknowledgementWholeValue(t *testing.T) {
	h := newHarness(t)
	h.drop(1)
	r := h.refused(ada, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug"}}, authority.Unavailable)
	mustContain(t, r.Sentence, "harmless")
	a := h.ok(ada, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug"}})
	b := h.ok(ada, "write_project", map[string]any{"project": "CORE", "labels": []string{"bug"}})
	if a["op_id"] == b["op_id"] || !slices.Equal(toStrings(b["labels"]), []string{"bug"}) {
		t.Fatalf("whole-value writes: %v %v", a, b)
	}
}

// WR-7: labels_create_missing declares first. A lost declaration stops the
// call as the item not filed; the same call again answers the declaration
// and files the item once.
func TestLabelsCreateMissing(t *testing.T) {
	h := newHarness(t)
	args := map[string]any{"title": "Tagged", "labels": []string{"perf", "db"}, "labels_create_missing": true}
	h.drop(1)
	r := h.refused(alan, "create_work_item", args, authority.Unavailable)
	mustContain(t, r.Sentence, "label declaration", "The item was not filed")
	if r.Data["key_if_filed"] != nil || h.countItems() != 0 {
		t.Fatalf("a call stopped at its declaration filed or named an item: %v", r.Data)
	}
	out := h.ok(alan, "create_work_item", args)
	if out["key"] != "CORE-1" || h.countItems() != 1 {
		t.Fatalf("repeat: %v", out)
	}
	again := h.ok(alan, "create_work_item", args)
	if again["key"] != "CORE-1" || h.countItems() != 1 {
		t.Fatalf("second repeat filed again: %v", again)
	}
	p := h.ok(alan, "get_project", map[string]any{"project": "CORE"})
	if !slices.Equal(toStrings(p["labels"]), []string{"db", "perf"}) {
		t.Fatalf("labels %v", p["labels"])
	}
	item := h.ok(alan, "get_work_item", map[string]any{"key": "CORE-1"})["item"].(map[string]any)
	if !slices.Equal(toStrings(item["labels"]), []string{"perf", "db"}) {
		t.Fatalf("item labels %v", item["labels"])
	}
	if l := h.ok(alan, "list_work_items", map[string]any{"label": "perf"}); len(l["items"].([]any)) != 1 {
		t.Fatalf("by label: %v", l)
	}
	// An update can declare too.
	upd := h.ok(alan, "update_work_item", map[string]any{"key": "CORE-1", "labels": []string{"perf", "ux"}, "labels_create_missing": true})
	if !slices.Contains(upd["changed"].([]any), any("labels")) {
		t.Fatalf("update %v", upd)
	}
	if l := h.ok(alan, "list_work_items", map[string]any{"label": "db", "project": "CORE"}); len(l["items"].([]any)) != 0 {
		t.Fatalf("a label that left still lists: %v", l)
	}
}

// WR-4: where this node's ledger cannot vouch for the operation, the answer
// says the node cannot tell and to look before writing again; repeating the
// same call stays safe and answers the same way.
func TestLedgerCannotVouch(t *testing.T) {
	h := newHarness(t)
	// The tracker's clock stamps writes; the write after the gap is an hour
	// later, so the node's horizon (the first operation after a gap) lies
	// after the instant the hidden call's turn began.
	now := time.Now()
	clock := func() time.Time { return now }
	h.connect(Deps{Node: h.node, Directory: testDirectory, Search: h.ix, Now: func() time.Time { return clock() }})
	h.log.Set(func(f *statetest.Faults) { f.Hide = 1 })
	args := map[string]any{"title": "Hidden from this node"}
	first := h.refused(alan, "create_work_item", args, authority.Unavailable)
	mustContain(t, first.Sentence, "may or may not have landed")
	// A later write reaches this node past the hidden entry: the gap
	// tells the node its record no longer reaches back to the first.
	later := now.Add(time.Hour)
	clock = func() time.Time { return later }
	after := h.ok(grace, "create_work_item", map[string]any{"title": "After the gap", "project": "OPS"})
	if after["outcome"] != "applied" {
		t.Fatalf("the first write after the gap answered %v", after)
	}
	for range 2 {
		r := h.refused(alan, "create_work_item", args, authority.Unavailable)
		mustContain(t, r.Sentence, "cannot tell", "Look first", "If it was filed, the key it has is CORE-1")
		if r.Data["outcome"] != "unknown" || r.Data["key"] != nil {
			t.Fatalf("data %v", r.Data)
		}
	}
	if h.countItems() != 1 {
		t.Fatalf("%d items on this node, want 1 (only the one after the gap)", h.countItems())
	}
}

// WR-1, WR-3: a write durable in the log but not yet on this node's
// projection answers pending with its position and the key it will have,
// never a version; once the projection catches up the item is there.
func TestPendingOutcome(t *testing.T) {
	ctx := context.Background()
	node, f := statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: Projectors(), ProjectionWait: 50 * time.Millisecond})
	h := &harness{t: t, node: node, log: f}
	h.connect(Deps{Node: node, Directory: testDirectory})
	f.Hold()
	out := h.ok(alan, "create_work_item", map[string]any{"title": "Maybe slow"})
	if out["outcome"] != "pending" || num(out["position"]) == 0 || out["key"] != "CORE-1" || out["note"] == nil {
		t.Fatalf("answer while the projection is held: %v", out)
	}
	for _, k := range []string{"version", "id"} {
		if _, ok := out[k]; ok {
			t.Fatalf("pending answered %s: %v", k, out)
		}
	}
	if h.countItems() != 0 {
		t.Fatal("the held projection shows the item already")
	}
	f.Release()
	if err := node.WaitFor(ctx, uint64(num(out["position"]))); err != nil {
		t.Fatal(err)
	}
	got := h.ok(alan, "get_work_item", map[string]any{"key": out["key"]})
	if servers.Unfence(got["item"].(map[string]any)["title"].(string)) != "Maybe slow" {
		t.Fatalf("after catching up: %v", got)
	}
	// The same call again is the same operation, now answered applied
	// from the ledger, with the version it landed at.
	again := h.ok(alan, "create_work_item", map[string]any{"title": "Maybe slow"})
	if again["outcome"] != "applied" || again["key"] != "CORE-1" || num(again["version"]) != 1 || h.countItems() != 1 {
		t.Fatalf("repeat after catching up: %v (%d items)", again, h.countItems())
	}
}
