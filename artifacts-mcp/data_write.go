package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- write_artifact_data ----

type opIn struct {
	Op         string         `json:"op" jsonschema:"set, merge, delete, increment, append, add or remove"`
	Collection string         `json:"collection" jsonschema:"the collection the row is in"`
	Doc        string         `json:"doc,omitempty" jsonschema:"the row's id; set without one adds a new row"`
	Data       map[string]any `json:"data,omitempty" jsonschema:"set: the row's whole fields; merge: fields to change (null removes one)"`
	Field      string         `json:"field,omitempty" jsonschema:"increment, append, add, remove: the column to change"`
	By         *float64       `json:"by,omitempty" jsonschema:"increment: how much (default 1)"`
	Values     []any          `json:"values,omitempty" jsonschema:"append, add, remove: the values (add keeps one of each; remove takes every equal one out)"`
	IfVersion  *int           `json:"if_version,omitempty" jsonschema:"write only if the row is still at this version (0: only if it does not exist yet); otherwise the batch is refused as a conflict with the rows as they are now"`
}

type writeDataIn struct {
	ID  string `json:"id" jsonschema:"the artifact's id (art_...)"`
	Ops []opIn `json:"ops" jsonschema:"1 to 100 ops, written all or none"`
	servers.OpIDArg
}

// stamp is who a datastore write is made as: the lower of the seat's and
// its requester's role (the seat's own on its own artifact), whether a
// person makes it, and whose rows (assigned_to_viewer) it may touch.
type stamp struct {
	Role  authority.ArtifactRole `json:"role"`
	Human bool                   `json:"human,omitempty"`
	As    string                 `json:"as"`
}

type dataPayload struct {
	ID    string `json:"id"`
	Ops   []opIn `json:"ops"`
	Stamp stamp  `json:"stamp"`
}

type rowResult struct {
	Collection string `json:"collection"`
	Doc        string `json:"doc"`
	Version    int    `json:"version,omitempty"`
	Deleted    bool   `json:"deleted,omitempty"`
}

type dataResult struct {
	ID   string      `json:"id"`
	Rows []rowResult `json:"rows"`
}

type writeDataOut struct {
	servers.WriteOut
	ID   string      `json:"id,omitempty"`
	URL  string      `json:"url,omitempty"`
	Rows []rowResult `json:"rows,omitempty"`
}

var docRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

var opNames = []string{"set", "merge", "delete", "increment", "append", "add", "remove"}

func (s *srv) writeArtifactData(ctx context.Context, c authority.Caller, in writeDataIn) (writeDataOut, error) {
	if len(in.Ops) < 1 || len(in.Ops) > maxOps {
		return writeDataOut{}, authority.Refuse(authority.Invalid, "ops holds %d ops; a batch is 1 to %d.", len(in.Ops), maxOps).WithData("argument", "ops").WithData("limit", maxOps)
	}
	call, err := s.w.Begin(c, "write_artifact_data", &in, false)
	if err != nil {
		return writeDataOut{}, err
	}
	var acc access
	wo, res, err := servers.Write[dataResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if acc, err = s.decide(c, art, in.ID, authority.VerbWriteData); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		q, err := quotaOf(r, c)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkDataOps(q, len(in.Ops)); err != nil {
			return servers.Intent{}, err
		}
		pl := dataPayload{ID: art.ID, Ops: in.Ops, Stamp: s.stampOf(c, acc)}
		sc, err := readSchema(r, art.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		// The same rules the projector applies, on what the projection
		// holds now: a batch they refuse is not written at all.
		if _, err := plan(r, art.ID, sc, pl.Ops, pl.Stamp, 0, servers.AuthorOf(c), time.Time{}); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindData, Payload: pl, What: fmt.Sprintf("the batch of %d ops on %s", len(in.Ops), art.ID)}, nil
	})
	if errors.Is(err, authority.ErrConflict) {
		return writeDataOut{}, s.conflictRows(acc, in.ID, authority.AsRefusal(err))
	}
	if err != nil {
		return writeDataOut{}, err
	}
	out := writeDataOut{WriteOut: wo, ID: in.ID, URL: s.url(in.ID)}
	if res != nil {
		out.Rows = res.Rows
		focus := "collection " + in.Ops[0].Collection
		if len(res.Rows) > 0 {
			focus += " row " + res.Rows[0].Doc
		}
		s.enter(ctx, c, in.ID, editing, focus)
	}
	return out, nil
}

// stampOf is what a datastore write is stamped with (ART-3).
func (s *srv) stampOf(c authority.Caller, acc access) stamp {
	st := stamp{Role: acc.Role, Human: c.Kind == authority.KindHuman, As: c.Seat}
	if c.Kind == authority.KindAgent && acc.ask.Requester == authority.RequesterKnown && !acc.Exempt {
		st.As = acc.requester
	}
	return st
}

// conflictRows is a conflict refusal with the rows as they are now — a
// read, bounded like one: only rows the call could read, and none where
// whom the turn acts for could not read the artifact (ART-3).
func (s *srv) conflictRows(acc access, id string, r *authority.Refusal) error {
	docs := strs(r.Data["conflicts"])
	e := envelope()
	rows := []map[string]any{}
	if acc.ShowReads {
		f := s.rowFilter(acc)
		_ = s.w.View(func(rd pebble.Reader) error {
			sc, err := readSchema(rd, id)
			if err != nil {
				return err
			}
			for _, d := range docs {
				collName, doc, _ := strings.Cut(d, "/")
				coll := sc.collection(collName)
				if coll == nil {
					continue
				}
				rw, err := readRow(rd, id, collName, doc)
				if err != nil {
					return err
				}
				switch {
				case rw == nil:
					rows = append(rows, map[string]any{"collection": collName, "doc": doc, "exists": false})
				case f.visible(coll, rw):
					rows = append(rows, map[string]any{"collection": collName, "row": fenceRow(e, rw)})
				}
			}
			return nil
		})
	}
	out := r.WithData("current", rows)
	if len(rows) > 0 {
		out = out.WithData("provenance", e.Provenance())
	}
	return out
}

// change is one row a batch changes.
type change struct {
	coll *collection
	doc  string
	old  *row // nil: the row is new
	now  *row // nil: the row is deleted
}

// plan decides a batch against the projection r, all or none: every op
// meets its collection's rules at the stamp's role, and if_version holds
// for every row it names. The tool calls it before writing (pos 0) and the
// projector again, in log order, where it decides.
func plan(r pebble.Reader, id string, sc *schema, ops []opIn, st stamp, pos uint64, by servers.Author, at time.Time) ([]*change, error) {
	touched := map[string]*change{}
	var order []*change
	var conflicts []string
	for i, op := range ops {
		field := fmt.Sprintf("ops[%d]", i)
		bad := func(format string, args ...any) error {
			return authority.Refuse(authority.Invalid, field+": "+format, args...).WithData("argument", field)
		}
		no := func(format string, args ...any) error {
			return authority.Refuse(authority.Forbidden, field+": "+format, args...).WithData("argument", field)
		}
		if !slices.Contains(opNames, op.Op) {
			return nil, bad("op %q is not one of %s.", op.Op, strings.Join(opNames, ", "))
		}
		coll := sc.collection(op.Collection)
		if coll == nil {
			return nil, bad("collection %q is none of this datastore's; set_artifact_schema declares collections.", op.Collection)
		}
		if st.Role < coll.writeRole() {
			return nil, no("writing rows of %s takes %s, and this call writes as %s.", coll.Name, coll.writeRole(), st.Role)
		}
		if coll.HumansOnly && !st.Human {
			return nil, no("only people write rows of %s (humans_only); an agent cannot make this change for anybody.", coll.Name)
		}
		doc := op.Doc
		if doc == "" {
			if op.Op != "set" {
				return nil, bad("%s needs doc, the row's id.", op.Op)
			}
			doc = fmt.Sprintf("d%x-%d", pos, i)
		} else if !docRE.MatchString(doc) {
			return nil, bad("doc %q is not a row id: letters, digits, _, . and -, at most 128.", doc)
		}
		key := coll.Name + "/" + doc
		ch := touched[key]
		if ch == nil {
			old, err := readRow(r, id, coll.Name, doc)
			if err != nil {
				return nil, err
			}
			ch = &change{coll: coll, doc: doc, old: old, now: old}
			touched[key] = ch
			order = append(order, ch)
		}
		if op.IfVersion != nil {
			cur := 0
			if ch.now != nil {
				cur = ch.now.Version
			}
			if cur != *op.IfVersion {
				conflicts = append(conflicts, key)
				continue
			}
		}
		if ch.old != nil && coll.AppendOnly {
			return nil, no("%s is append-only: its rows are only ever added, and %s exists.", coll.Name, doc)
		}
		if coll.AssignedToViewer != "" && st.Role < authority.RoleEditor && ch.old != nil && coll.assignee(ch.old.Data) != st.As {
			return nil, no("row %s of %s is not assigned to @%s, and below editor one writes only one's own rows.", doc, coll.Name, st.As)
		}
		next, err := applyOp(coll, ch.now, op, bad)
		if err != nil {
			return nil, err
		}
		if next == nil {
			if ch.now == nil {
				return nil, bad("delete names %s/%s, which holds no row.", coll.Name, doc)
			}
			for _, im := range coll.Immutable {
				if ch.now.Data[im] != nil {
					return nil, no("%s.%s is immutable and row %s holds it, so the row is not deleted.", coll.Name, im, doc)
				}
			}
			ch.now = nil
			continue
		}
		if err := checkRow(coll, ch.now, next, st, bad, no); err != nil {
			return nil, err
		}
		nr := &row{Doc: doc, Data: next, Version: 1, CreatedBy: by, UpdatedBy: by, CreatedAt: at, UpdatedAt: at, Pos: pos}
		if ch.now != nil {
			nr.Version, nr.CreatedBy, nr.CreatedAt = ch.now.Version+1, ch.now.CreatedBy, ch.now.CreatedAt
		}
		ch.now = nr
	}
	if len(conflicts) > 0 {
		return nil, authority.Refuse(authority.Conflict, "if_version no longer holds for %s: somebody changed them since they were read. Nothing of the batch was written; the rows as they are now are in current.", strings.Join(conflicts, ", ")).
			WithData("conflicts", conflicts)
	}
	return order, nil
}

// applyOp is one op on a row's fields (nil: no row); nil back deletes it.
func applyOp(coll *collection, cur *row, op opIn, bad func(string, ...any) error) (map[string]any, error) {
	data := map[string]any{}
	if cur != nil {
		for k, v := range cur.Data {
			data[k] = v
		}
	}
	listField := func() ([]any, error) {
		col := coll.column(op.Field)
		if col == nil {
			return nil, bad("field %q is no column of %s.", op.Field, coll.Name)
		}
		if col.Type != "list" && col.Type != "any" {
			return nil, bad("%s works on a list column, and %s.%s is %s.", op.Op, coll.Name, op.Field, col.Type)
		}
		if len(op.Values) == 0 {
			return nil, bad("%s needs values.", op.Op)
		}
		switch v := data[op.Field].(type) {
		case nil:
			return nil, nil
		case []any:
			return slices.Clone(v), nil
		}
		return nil, bad("%s.%s holds no list.", coll.Name, op.Field)
	}
	switch op.Op {
	case "set":
		data = map[string]any{}
		for k, v := range op.Data {
			data[k] = v
		}
	case "merge":
		if len(op.Data) == 0 {
			return nil, bad("merge needs data.")
		}
		for k, v := range op.Data {
			if v == nil {
				delete(data, k)
			} else {
				data[k] = v
			}
		}
	case "delete":
		return nil, nil
	case "increment":
		col := coll.column(op.Field)
		if col == nil || (col.Type != "number" && col.Type != "any") {
			return nil, bad("increment works on a number column; %q is none of %s.", op.Field, coll.Name)
		}
		by := 1.0
		if op.By != nil {
			by = *op.By
		}
		n, ok := data[op.Field].(float64)
		if data[op.Field] != nil && !ok {
			return nil, bad("%s.%s holds no number.", coll.Name, op.Field)
		}
		data[op.Field] = n + by
	case "append", "add", "remove":
		list, err := listField()
		if err != nil {
			return nil, err
		}
		for _, v := range op.Values {
			has := slices.ContainsFunc(list, func(x any) bool { return reflect.DeepEqual(x, v) })
			switch {
			case op.Op == "append", op.Op == "add" && !has:
				list = append(list, v)
			case op.Op == "remove":
				list = slices.DeleteFunc(list, func(x any) bool { return reflect.DeepEqual(x, v) })
			}
		}
		data[op.Field] = list
	}
	return data, nil
}

// checkRow is every column rule a row written keeps.
func checkRow(coll *collection, old *row, data map[string]any, st stamp, bad, no func(string, ...any) error) error {
	for k, v := range data {
		if old != nil && reflect.DeepEqual(old.Data[k], v) {
			continue // kept as it was, even from a column since dropped
		}
		col := coll.column(k)
		if col == nil {
			return bad("%q is no column of %s.", k, coll.Name)
		}
		if !typed(col.Type, v) {
			return bad("%s.%s is a %s column, and %v is not one.", coll.Name, k, col.Type, v)
		}
	}
	if old != nil {
		for _, im := range coll.Immutable {
			if old.Data[im] != nil && !reflect.DeepEqual(old.Data[im], data[im]) {
				return no("%s.%s is immutable: row %s holds it already.", coll.Name, im, old.Doc)
			}
		}
	}
	for _, cond := range coll.Conditions {
		if err := cond.holds(data[cond.Column]); err != "" {
			return bad("%s.%s %s.", coll.Name, cond.Column, err)
		}
	}
	if coll.AssignedToViewer != "" && st.Role < authority.RoleEditor && coll.assignee(data) != st.As {
		return no("rows of %s are assigned in %s, and below editor one writes only rows assigned to oneself (@%s).", coll.Name, coll.AssignedToViewer, st.As)
	}
	if b, _ := json.Marshal(data); len(b) > maxRowBytes {
		return bad("the row would be %d bytes; a row is at most %d.", len(b), maxRowBytes)
	}
	return nil
}

func typed(t string, v any) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "list":
		_, ok := v.([]any)
		return ok
	}
	return true
}

// holds says what is wrong with v under the condition ("" when it holds).
func (c condition) holds(v any) string {
	if v == nil {
		if c.Required {
			return "is required"
		}
		return ""
	}
	if len(c.OneOf) > 0 && !slices.ContainsFunc(c.OneOf, func(x any) bool { return reflect.DeepEqual(x, v) }) {
		b, _ := json.Marshal(c.OneOf)
		return fmt.Sprintf("must be one of %s", b)
	}
	if c.Min != nil || c.Max != nil {
		n, ok := v.(float64)
		switch {
		case !ok:
			return "must be a number"
		case c.Min != nil && n < *c.Min:
			return fmt.Sprintf("must be at least %v", *c.Min)
		case c.Max != nil && n > *c.Max:
			return fmt.Sprintf("must be at most %v", *c.Max)
		}
	}
	return ""
}

func applyData(a *applier) (any, error) {
	var pl dataPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if len(pl.Ops) < 1 || len(pl.Ops) > maxOps {
		return nil, authority.Refuse(authority.Invalid, "a batch is 1 to %d ops, and this one has %d.", maxOps, len(pl.Ops))
	}
	if err := a.countDataOps(len(pl.Ops)); err != nil {
		return nil, err
	}
	sc, err := readSchema(a.R, art.ID)
	if err != nil {
		return nil, err
	}
	changes, err := plan(a.R, art.ID, sc, pl.Ops, pl.Stamp, a.Pos, a.By, a.At())
	if err != nil {
		return nil, err
	}
	res := dataResult{ID: art.ID, Rows: []rowResult{}}
	for _, ch := range changes {
		if err := a.writeRow(art.ID, ch); err != nil {
			return nil, err
		}
		rr := rowResult{Collection: ch.coll.Name, Doc: ch.doc, Deleted: ch.now == nil}
		if ch.now != nil {
			rr.Version = ch.now.Version
		}
		res.Rows = append(res.Rows, rr)
	}
	return res, nil
}

// writeRow writes one change with its index and change-feed rows.
func (a *applier) writeRow(id string, ch *change) error {
	coll := ch.coll
	if ch.old != nil {
		for _, k := range indexKeys(id, coll, ch.old) {
			if err := a.B.Delete([]byte(k), nil); err != nil {
				return err
			}
		}
		if err := a.B.Delete([]byte(changeKey(id, coll.Name, ch.old.Pos, ch.doc)), nil); err != nil {
			return err
		}
	}
	if ch.now == nil {
		if err := a.B.Delete([]byte(rowKey(id, coll.Name, ch.doc)), nil); err != nil {
			return err
		}
		return a.B.Set([]byte(changeKey(id, coll.Name, a.Pos, ch.doc)), []byte(`{"deleted":true}`), nil)
	}
	ch.now.Pos = a.Pos
	if err := state.SetJSON(a.B, rowKey(id, coll.Name, ch.doc), ch.now); err != nil {
		return err
	}
	for _, k := range indexKeys(id, coll, ch.now) {
		if err := a.B.Set([]byte(k), nil, nil); err != nil {
			return err
		}
	}
	return a.B.Set([]byte(changeKey(id, coll.Name, a.Pos, ch.doc)), []byte(`{}`), nil)
}
