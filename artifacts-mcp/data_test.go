package artifacts

import (
	"fmt"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state/statetest"
)

var approvals = []any{map[string]any{
	"name":    "tasks",
	"columns": []any{map[string]any{"name": "title", "type": "string"}, map[string]any{"name": "owner", "type": "string", "indexed": true}, map[string]any{"name": "points", "type": "number", "indexed": true}, map[string]any{"name": "tags", "type": "list"}},
	"write":   "contributor", "assigned_to_viewer": "owner",
	"conditions": []any{map[string]any{"column": "points", "min": 0, "max": 100}},
}, map[string]any{
	"name":        "approvals",
	"columns":     []any{map[string]any{"name": "by", "type": "string"}, map[string]any{"name": "ok", "type": "boolean", "protected": true}},
	"humans_only": true, "append_only": true, "immutable": []any{"ok"},
}}

func op(kind, coll, doc string, data map[string]any) map[string]any {
	m := map[string]any{"op": kind, "collection": coll}
	if doc != "" {
		m["doc"] = doc
	}
	if data != nil {
		m["data"] = data
	}
	return m
}

func ops(list ...map[string]any) []any {
	out := make([]any, len(list))
	for i, o := range list {
		out[i] = o
	}
	return out
}

// rowData reads a fenced row's fields.
func rowData(t *testing.T, r any) string { return servers.Unfence(asMap(r)["data"].(string)) }

// ART-3: the datastore through the tools: schema, the seven ops all or
// none, rows bounded by the requester's read rule and written at the lower
// role, humans_only, append_only and immutability, if_version conflicts
// answering only rows the requester could read, rows fenced as
// artifact_row.
func TestDatastore(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Board", "{}")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "unit:core", "role": "contributor"}) // bob, alan
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "viewer"})
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": approvals})
	schema := h.OK(grace, "read_artifact_data", map[string]any{"id": id})
	if cols := asList(schema["collections"]); len(cols) != 2 || asMap(cols[0])["write"] != "contributor" || asMap(cols[1])["humans_only"] != true {
		t.Fatalf("schema %v", schema)
	}

	w := h.OK(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(
		op("set", "tasks", "t1", map[string]any{"title": "Ship", "owner": "bob", "points": 3}),
		op("set", "tasks", "", map[string]any{"title": "Bob's second", "owner": "bob", "points": 5}),
		map[string]any{"op": "increment", "collection": "tasks", "doc": "t1", "field": "points", "by": 2},
		map[string]any{"op": "append", "collection": "tasks", "doc": "t1", "field": "tags", "values": []any{"a", "a"}},
		map[string]any{"op": "add", "collection": "tasks", "doc": "t1", "field": "tags", "values": []any{"a", "b"}},
		map[string]any{"op": "remove", "collection": "tasks", "doc": "t1", "field": "tags", "values": []any{"a"}},
		op("merge", "tasks", "t1", map[string]any{"title": "Ship it"}),
	)})
	if w["outcome"] != "applied" || len(asList(w["rows"])) != 2 {
		t.Fatalf("write %v", w)
	}
	one := h.OK(bob, "read_artifact_data", map[string]any{"id": id, "collection": "tasks", "doc": "t1"})
	row := asList(one["rows"])[0]
	if got := rowData(t, row); got != `{"owner":"bob","points":5,"tags":["b"],"title":"Ship it"}` || num(asMap(row)["version"]) != 6 {
		t.Fatalf("row %s v%v", got, asMap(row)["version"])
	}
	mustContain(t, asMap(row)["data"].(string), "what=artifact_row by=@bob (human)")
	// All or none: a bad op refuses the batch, and nothing of it is written.
	r := h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(
		op("set", "tasks", "t9", map[string]any{"title": "never", "owner": "bob", "points": 1}),
		op("set", "tasks", "t10", map[string]any{"title": "too many", "owner": "bob", "points": 101}))}, authority.Invalid)
	mustContain(t, r.Sentence, "ops[1]", "at most 100")
	h.Refused(bob, "read_artifact_data", map[string]any{"id": id, "collection": "tasks", "doc": "t9"}, authority.NotFound)
	h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "tasks", "t11", map[string]any{"nope": 1, "owner": "bob"}))}, authority.Invalid)
	h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": []any{}}, authority.Invalid)

	// assigned_to_viewer: below editor one reads and writes only one's own
	// rows; an editor (ada, the owner) reads them all.
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "tasks", "t2", map[string]any{"title": "Ada's", "owner": "ada", "points": 1}))})
	h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "tasks", "t2", map[string]any{"title": "mine now"}))}, authority.Forbidden)
	h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "tasks", "t3", map[string]any{"title": "for ada", "owner": "ada"}))}, authority.Forbidden)
	if rows := asList(h.OK(bob, "read_artifact_data", map[string]any{"id": id, "collection": "tasks"})["rows"]); len(rows) != 2 {
		t.Fatalf("bob reads %d rows, want his 2", len(rows))
	}
	if rows := asList(h.OK(ada, "read_artifact_data", map[string]any{"id": id, "collection": "tasks"})["rows"]); len(rows) != 3 {
		t.Fatalf("ada reads %d rows, want 3", len(rows))
	}
	// The requester ceiling on rows: alan (a contributor) acting for grace
	// reads only rows grace could read herself — none assigned to her.
	if rows := asList(h.OK(turn(alan, "t-g", "grace"), "read_artifact_data", map[string]any{"id": id, "collection": "tasks"})["rows"]); len(rows) != 0 {
		t.Fatalf("alan for grace reads %v", rows)
	}
	// ...and writes nothing for her: she is a viewer.
	h.Refused(turn(alan, "t-g", "grace"), "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "tasks", "", map[string]any{"owner": "grace"}))}, authority.Forbidden)
	// Acting for bob, alan writes as the lower of the two: a contributor,
	// for bob's rows.
	h.OK(turn(alan, "t-b", "bob"), "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "tasks", "t1", map[string]any{"title": "via alan"}))})

	// humans_only, append_only, immutable.
	r = h.Refused(turn(alan, "t-a", "ada"), "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "approvals", "", map[string]any{"by": "alan", "ok": true}))}, authority.Forbidden)
	mustContain(t, r.Sentence, "humans_only")
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "approvals", "a1", map[string]any{"by": "ada", "ok": true}))})
	r = h.Refused(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "approvals", "a1", map[string]any{"ok": false}))}, authority.Forbidden)
	mustContain(t, r.Sentence, "append-only")
	h.Refused(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("delete", "approvals", "a1", nil))}, authority.Forbidden)

	// if_version: a conflict answers the rows as they are now, only those
	// the call could read.
	stale := map[string]any{"op": "merge", "collection": "tasks", "doc": "t1", "data": map[string]any{"title": "stale"}, "if_version": 1}
	c := h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(stale)}, authority.Conflict)
	cur := asList(c.Data["current"])
	if len(cur) != 1 || !strings.Contains(rowData(t, asMap(cur[0])["row"]), "via alan") || c.Data["provenance"] == nil {
		t.Fatalf("conflict current %v", c.Data)
	}
	fresh := map[string]any{"op": "set", "collection": "tasks", "doc": "t1", "data": map[string]any{"owner": "bob"}, "if_version": 0}
	h.Refused(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(fresh)}, authority.Conflict)
	ok := map[string]any{"op": "merge", "collection": "tasks", "doc": "t1", "data": map[string]any{"points": 8}, "if_version": 7}
	h.OK(bob, "write_artifact_data", map[string]any{"id": id, "ops": ops(ok)})

	// delete, and since: what changed after an earlier read.
	through := num(h.OK(ada, "read_artifact_data", map[string]any{"id": id, "collection": "tasks"})["through"])
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("delete", "tasks", "t2", nil), op("merge", "tasks", "t1", map[string]any{"points": 9}))})
	since := h.OK(ada, "read_artifact_data", map[string]any{"id": id, "collection": "tasks", "since": through})
	if fmt.Sprint(since["deleted"]) != "[t2]" || len(asList(since["rows"])) != 1 {
		t.Fatalf("since %v", since)
	}
}

// ART-3: a conflict on an agent's own artifact, edited for somebody it is
// not shared with, answers no rows at all.
func TestConflictShowsNoRowsToWhomCannotRead(t *testing.T) {
	h := newHarness(t)
	self := turn(alan, "t0", "alan")
	id := h.create(self, "Alan's sheet", "{}")
	h.OK(self, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "notes", "columns": []any{map[string]any{"name": "text"}}}}})
	h.OK(self, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "notes", "n1", map[string]any{"text": "private"}))})
	forGrace := turn(alan, "t1", "grace")
	// The write itself is allowed (his own artifact), stamped as the owner...
	h.OK(forGrace, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "notes", "n2", map[string]any{"text": "for grace"}))})
	// ...but what a write hands back is a read, and grace reads nothing.
	c := h.Refused(forGrace, "write_artifact_data", map[string]any{"id": id, "ops": ops(map[string]any{"op": "merge", "collection": "notes", "doc": "n1", "data": map[string]any{"text": "x"}, "if_version": 7})}, authority.Conflict)
	if cur := asList(c.Data["current"]); len(cur) != 0 || strings.Contains(fmt.Sprint(c), "private") {
		t.Fatalf("conflict shows %v", c.Data)
	}
	h.Refused(forGrace, "read_artifact_data", map[string]any{"id": id, "collection": "notes"}, authority.NotFound)
}

// ART-8: an agent may tighten a collection's rules, never loosen them; a
// person may.
func TestSchemaTightenOnly(t *testing.T) {
	h := newHarness(t)
	h.manageOthers = true
	id := h.create(ada, "Rules", "{}")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "editor"})
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": approvals})
	tighter := []any{asMap(approvals[0]), map[string]any{
		"name": "approvals", "columns": []any{map[string]any{"name": "by", "type": "string"}, map[string]any{"name": "ok", "type": "boolean", "protected": true}},
		"humans_only": true, "append_only": true, "immutable": []any{"ok", "by"}, "read": "contributor",
	}}
	h.OK(alan, "set_artifact_schema", map[string]any{"id": id, "collections": tighter})
	for name, loose := range map[string][]any{
		"drops a collection":    tighter[:1],
		"lifts humans_only":     {tighter[0], with(tighter[1], "humans_only", false)},
		"lifts append_only":     {tighter[0], with(tighter[1], "append_only", false)},
		"lifts immutability":    {tighter[0], with(tighter[1], "immutable", []any{"ok"})},
		"lowers a role":         {tighter[0], with(tighter[1], "read", "viewer")},
		"removes a condition":   {with(tighter[0], "conditions", []any{}), tighter[1]},
		"repoints the assignee": {with(tighter[0], "assigned_to_viewer", "title"), tighter[1]},
		"drops a protected col": {tighter[0], with(with(tighter[1], "columns", []any{map[string]any{"name": "by", "type": "string"}}), "immutable", []any{"by"})},
	} {
		r := h.Refused(turn(alan, "t-"+name, "ada"), "set_artifact_schema", map[string]any{"id": id, "collections": loose}, authority.Forbidden)
		mustContain(t, r.Sentence, "never loosen")
	}
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": tighter[:1]})
	h.Refused(ada, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "Bad Name", "columns": []any{map[string]any{"name": "x"}}}}}, authority.Invalid)
}

func with(m any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range asMap(m) {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// ART-3: queries on indexed columns, ordered and paged, bounded by the
// read rule.
func TestQuery(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Scores", "{}")
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "scores",
		"columns": []any{map[string]any{"name": "team", "type": "string", "indexed": true}, map[string]any{"name": "score", "type": "number", "indexed": true}, map[string]any{"name": "note"}}}}})
	var list []map[string]any
	for i := range 30 {
		list = append(list, op("set", "scores", fmt.Sprintf("s%02d", i), map[string]any{"team": []string{"red", "blue"}[i%2], "score": float64(i - 10)}))
	}
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(list...)})
	q := h.OK(ada, "query_artifact_data", map[string]any{"id": id, "collection": "scores", "where": []any{
		map[string]any{"column": "team", "value": "red"}, map[string]any{"column": "score", "op": "gte", "value": -4}},
		"order_by": "score", "desc": true, "limit": 5})
	rows := asList(q["rows"])
	if len(rows) != 5 || !strings.Contains(rowData(t, rows[0]), `"score":18`) || q["next_cursor"] == nil {
		t.Fatalf("query %v", q)
	}
	next := h.OK(ada, "query_artifact_data", map[string]any{"id": id, "collection": "scores", "where": []any{
		map[string]any{"column": "team", "value": "red"}, map[string]any{"column": "score", "op": "gte", "value": -4}},
		"order_by": "score", "desc": true, "limit": 5, "cursor": q["next_cursor"]})
	if rows := asList(next["rows"]); len(rows) != 5 || next["next_cursor"] != "o10" {
		t.Fatalf("second page %v", next)
	}
	last := h.OK(ada, "query_artifact_data", map[string]any{"id": id, "collection": "scores", "where": []any{
		map[string]any{"column": "team", "value": "red"}, map[string]any{"column": "score", "op": "gte", "value": -4}},
		"order_by": "score", "desc": true, "limit": 5, "cursor": "o10"})
	if rows := asList(last["rows"]); len(rows) != 2 || !strings.Contains(rowData(t, rows[1]), `"score":-4`) || last["next_cursor"] != nil {
		t.Fatalf("last page %v", last)
	}
	// An equality in row id order is read as it is walked, page by page.
	var docs []string
	cursor := ""
	for range 4 {
		args := map[string]any{"id": id, "collection": "scores", "where": []any{map[string]any{"column": "team", "value": "blue"}}, "limit": 4}
		if cursor != "" {
			args["cursor"] = cursor
		}
		page := h.OK(ada, "query_artifact_data", args)
		for _, r := range asList(page["rows"]) {
			docs = append(docs, asMap(r)["doc"].(string))
		}
		cursor, _ = page["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if len(docs) != 15 || docs[0] != "s01" || docs[14] != "s29" {
		t.Fatalf("blue rows in id order: %v", docs)
	}
	h.Refused(ada, "query_artifact_data", map[string]any{"id": id, "collection": "scores", "where": []any{map[string]any{"column": "note", "value": "x"}}}, authority.Invalid)
	h.Refused(ada, "query_artifact_data", map[string]any{"id": id, "collection": "scores", "where": []any{map[string]any{"column": "score", "value": "high"}}}, authority.Invalid)
	h.Refused(ada, "query_artifact_data", map[string]any{"id": id, "collection": "nope"}, authority.Invalid)
}

// ART-3: a turn writes at most 1,000 ops; a retried lost call is not
// counted again.
func TestDataOpsQuota(t *testing.T) {
	h := newHarness(t)
	c := turn(alan, "ops-turn", "alan")
	id := h.create(c, "Counts", "{}")
	h.OK(c, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "n", "columns": []any{map[string]any{"name": "v", "type": "number"}}}}})
	batch := func(i int) map[string]any {
		var l []map[string]any
		for j := range 100 {
			l = append(l, op("set", "n", fmt.Sprintf("b%d-%d", i, j), map[string]any{"v": j}))
		}
		return map[string]any{"id": id, "ops": ops(l...)}
	}
	for i := range 9 {
		h.OK(c, "write_artifact_data", batch(i))
	}
	// The tenth batch's answer is lost; its repeat lands once and counts once.
	h.log.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	h.Refused(c, "write_artifact_data", batch(9), authority.Unavailable)
	h.OK(c, "write_artifact_data", batch(9))
	r := h.Refused(c, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "n", "one-more", map[string]any{"v": 1}))}, authority.TurnQuota)
	mustContain(t, r.Sentence, "1001", "1000")
}

// ART-3: an immutable column never changes once a row holds it, and a row
// holding it is not deleted; a batch of more than 100 ops is refused.
func TestImmutableColumns(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Decisions", "{}")
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "decisions",
		"columns": []any{map[string]any{"name": "verdict", "type": "string"}, map[string]any{"name": "note", "type": "string"}}, "immutable": []any{"verdict"}}}})
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "decisions", "d1", map[string]any{"note": "pending"}))})
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "decisions", "d1", map[string]any{"verdict": "yes"}))})
	h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "decisions", "d1", map[string]any{"note": "agreed"}))})
	r := h.Refused(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("merge", "decisions", "d1", map[string]any{"verdict": "no"}))}, authority.Forbidden)
	mustContain(t, r.Sentence, "decisions.verdict is immutable")
	h.Refused(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("delete", "decisions", "d1", nil))}, authority.Forbidden)
	var many []map[string]any
	for i := range 101 {
		many = append(many, op("set", "decisions", fmt.Sprintf("m%d", i), map[string]any{"note": "n"}))
	}
	r = h.Refused(ada, "write_artifact_data", map[string]any{"id": id, "ops": ops(many...)}, authority.Invalid)
	mustContain(t, r.Sentence, "1 to 100")
}
