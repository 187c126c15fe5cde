package artifacts

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- read_artifact_data ----

type readDataIn struct {
	ID         string `json:"id" jsonschema:"the artifact's id (art_...)"`
	Collection string `json:"collection,omitempty" jsonschema:"a collection to read rows of; without one, the datastore's schema"`
	Doc        string `json:"doc,omitempty" jsonschema:"one row's id"`
	Since      uint64 `json:"since,omitempty" jsonschema:"only rows changed after this through of an earlier read"`
	Limit      int    `json:"limit,omitempty" jsonschema:"how many rows, 1 to 500; default 100"`
	After      string `json:"after,omitempty" jsonschema:"next_after from the previous page"`
}

type collectionView struct {
	Name             string      `json:"name"`
	Columns          []column    `json:"columns"`
	Read             string      `json:"read"`
	Write            string      `json:"write"`
	HumansOnly       bool        `json:"humans_only,omitempty"`
	AppendOnly       bool        `json:"append_only,omitempty"`
	Immutable        []string    `json:"immutable,omitempty"`
	Conditions       []condition `json:"conditions,omitempty"`
	AssignedToViewer string      `json:"assigned_to_viewer,omitempty"`
}

type readDataOut struct {
	Provenance  *servers.Provenance `json:"provenance,omitempty"`
	ID          string              `json:"id"`
	Collections []collectionView    `json:"collections,omitempty"`
	Collection  string              `json:"collection,omitempty"`
	Rows        []rowOut            `json:"rows,omitempty"`
	Deleted     []string            `json:"deleted,omitempty"`
	// Through is the position this read saw: since=through reads only what
	// changed after it.
	Through   uint64 `json:"through,omitempty"`
	NextAfter string `json:"next_after,omitempty"`
}

// dataReadable is a data read's artifact, decision, schema and collection.
func (s *srv) dataReadable(ctx context.Context, c authority.Caller, id, collName, tool string) (*artifact, access, *schema, *collection, error) {
	art, acc, err := s.readable(ctx, c, id, tool, collName)
	if err != nil {
		return nil, acc, nil, nil, err
	}
	var sc *schema
	if err := s.w.View(func(r pebble.Reader) error {
		var err error
		sc, err = readSchema(r, art.ID)
		return err
	}); err != nil {
		return nil, acc, nil, nil, err
	}
	if collName == "" {
		return art, acc, sc, nil, nil
	}
	coll := sc.collection(collName)
	if coll == nil {
		return nil, acc, nil, nil, authority.Refuse(authority.Invalid, "collection %q is none of %s's datastore.", collName, art.ID).WithData("argument", "collection")
	}
	return art, acc, sc, coll, nil
}

func (s *srv) readArtifactData(ctx context.Context, c authority.Caller, in readDataIn) (readDataOut, error) {
	limit, err := servers.PageLimit(in.Limit, 100, 500)
	if err != nil {
		return readDataOut{}, err
	}
	if in.Collection == "" && (in.Doc != "" || in.Since != 0 || in.After != "") {
		return readDataOut{}, authority.Refuse(authority.Invalid, "doc, since and after read rows of a collection; name it.").WithData("argument", "collection")
	}
	art, acc, sc, coll, err := s.dataReadable(ctx, c, in.ID, in.Collection, "read_artifact_data")
	if err != nil {
		return readDataOut{}, err
	}
	out := readDataOut{ID: art.ID}
	if coll == nil {
		out.Collections = []collectionView{}
		for _, c := range sc.Collections {
			out.Collections = append(out.Collections, collectionView{Name: c.Name, Columns: c.Columns, Read: c.readRole().String(), Write: c.writeRole().String(),
				HumansOnly: c.HumansOnly, AppendOnly: c.AppendOnly, Immutable: c.Immutable, Conditions: c.Conditions, AssignedToViewer: c.AssignedToViewer})
		}
		s.enter(ctx, c, art.ID, viewing, "schema")
		return out, nil
	}
	out.Collection = coll.Name
	f := s.rowFilter(acc)
	e := envelope()
	out.Rows = []rowOut{}
	var lastKey string
	err = s.w.View(func(r pebble.Reader) error {
		out.Through = s.w.Node().Position()
		switch {
		case in.Doc != "":
			rw, err := readRow(r, art.ID, coll.Name, in.Doc)
			if err != nil {
				return err
			}
			if rw == nil || !f.visible(coll, rw) {
				return authority.Refuse(authority.NotFound, "%s's collection %s has no row %q.", art.ID, coll.Name, in.Doc)
			}
			out.Rows = append(out.Rows, fenceRow(e, rw))
			return nil
		case in.Since != 0:
			// The change feed, oldest change first; after is the last
			// change key answered.
			prefix := kChange + art.ID + "/" + coll.Name + "/"
			after := in.After
			if after == "" {
				after = fmt.Sprintf("%016x", in.Since) + "/\xff"
			}
			return each(r, prefix, after, func(k, v []byte) (bool, error) {
				rest := strings.TrimPrefix(string(k), prefix)
				_, doc, _ := strings.Cut(rest, "/")
				if len(out.Rows)+len(out.Deleted) == limit {
					out.NextAfter = lastKey
					return false, nil
				}
				if strings.Contains(string(v), "deleted") {
					out.Deleted = append(out.Deleted, doc)
					lastKey = rest
					return true, nil
				}
				rw, err := readRow(r, art.ID, coll.Name, doc)
				if err != nil || rw == nil {
					return err == nil, err
				}
				if f.visible(coll, rw) {
					out.Rows = append(out.Rows, fenceRow(e, rw))
				}
				lastKey = rest
				return true, nil
			})
		}
		prefix := kRow + art.ID + "/" + coll.Name + "/"
		return each(r, prefix, in.After, func(k, v []byte) (bool, error) {
			var rw row
			if err := state.DecodeJSON(k, v, &rw); err != nil {
				return false, err
			}
			if !f.visible(coll, &rw) {
				return true, nil
			}
			if len(out.Rows) == limit {
				out.NextAfter = out.Rows[limit-1].Doc
				return false, nil
			}
			out.Rows = append(out.Rows, fenceRow(e, &rw))
			return true, nil
		})
	})
	if err != nil {
		return readDataOut{}, err
	}
	pv := e.Provenance()
	out.Provenance = &pv
	focus := "collection " + coll.Name
	if in.Doc != "" {
		focus += " row " + in.Doc
	}
	s.enter(ctx, c, art.ID, viewing, focus)
	return out, nil
}

// ---- query_artifact_data ----

type filterIn struct {
	Column string `json:"column" jsonschema:"an indexed column"`
	Op     string `json:"op,omitempty" jsonschema:"eq (the default), lt, lte, gt or gte"`
	Value  any    `json:"value" jsonschema:"a string, number or boolean"`
}

type queryIn struct {
	ID         string     `json:"id" jsonschema:"the artifact's id (art_...)"`
	Collection string     `json:"collection" jsonschema:"the collection to query"`
	Where      []filterIn `json:"where,omitempty" jsonschema:"filters on indexed columns; a row matches all of them"`
	OrderBy    string     `json:"order_by,omitempty" jsonschema:"an indexed column to order by; by row id otherwise"`
	Desc       bool       `json:"desc,omitempty" jsonschema:"order from the greatest value down"`
	Limit      int        `json:"limit,omitempty" jsonschema:"how many rows, 1 to 500; default 50"`
	Cursor     string     `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page of the same query"`
}

type queryOut struct {
	Provenance servers.Provenance `json:"provenance"`
	ID         string             `json:"id"`
	Collection string             `json:"collection"`
	Rows       []rowOut           `json:"rows"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

var filterOps = []string{"eq", "lt", "lte", "gt", "gte"}

func (s *srv) queryArtifactData(ctx context.Context, c authority.Caller, in queryIn) (queryOut, error) {
	limit, err := servers.PageLimit(in.Limit, 50, 500)
	if err != nil {
		return queryOut{}, err
	}
	art, acc, _, coll, err := s.dataReadable(ctx, c, in.ID, in.Collection, "query_artifact_data")
	if err != nil {
		return queryOut{}, err
	}
	if coll == nil {
		return queryOut{}, authority.Refuse(authority.Invalid, "collection is required.").WithData("argument", "collection")
	}
	type filter struct {
		col, op, enc string
	}
	var filters []filter
	for i, w := range in.Where {
		field := fmt.Sprintf("where[%d]", i)
		col := coll.column(w.Column)
		if col == nil || !col.Indexed {
			return queryOut{}, authority.Refuse(authority.Invalid, "%s names %q, which is no indexed column of %s; a query filters on indexed columns only.", field, w.Column, coll.Name).WithData("argument", field)
		}
		op := w.Op
		if op == "" {
			op = "eq"
		}
		if !contains(filterOps, op) {
			return queryOut{}, authority.Refuse(authority.Invalid, "%s.op %q is not one of %s.", field, w.Op, strings.Join(filterOps, ", ")).WithData("argument", field)
		}
		enc, ok := encodeValue(w.Value)
		if !ok || !typed(col.Type, w.Value) {
			return queryOut{}, authority.Refuse(authority.Invalid, "%s.value must be a %s, as %s is.", field, col.Type, w.Column).WithData("argument", field)
		}
		filters = append(filters, filter{w.Column, op, enc})
	}
	if in.OrderBy != "" {
		if col := coll.column(in.OrderBy); col == nil || !col.Indexed {
			return queryOut{}, authority.Refuse(authority.Invalid, "order_by names %q, which is no indexed column of %s.", in.OrderBy, coll.Name).WithData("argument", "order_by")
		}
	}
	offset := 0
	if in.Cursor != "" {
		if offset, err = strconv.Atoi(strings.TrimPrefix(in.Cursor, "o")); err != nil || offset < 0 || !strings.HasPrefix(in.Cursor, "o") {
			return queryOut{}, authority.Refuse(authority.Invalid, "cursor is not a next_cursor this query answered.").WithData("argument", "cursor")
		}
	}
	match := func(rw *row) bool {
		for _, f := range filters {
			enc, ok := encodeValue(rw.Data[f.col])
			if !ok {
				return false
			}
			cmp := strings.Compare(enc, f.enc)
			switch {
			case f.op == "eq" && cmp != 0, f.op == "lt" && cmp >= 0, f.op == "lte" && cmp > 0, f.op == "gt" && cmp <= 0, f.op == "gte" && cmp < 0:
				return false
			}
		}
		return true
	}
	rf := s.rowFilter(acc)
	e := envelope()
	out := queryOut{ID: art.ID, Collection: coll.Name, Rows: []rowOut{}}
	err = s.w.View(func(r pebble.Reader) error {
		// Drive the walk from one index: an equality filter narrows most,
		// then a range, else every row of the collection in id order.
		drive := -1
		for i, f := range filters {
			if f.op == "eq" {
				drive = i
				break
			}
			if drive < 0 {
				drive = i
			}
		}
		prefix := kRow + art.ID + "/" + coll.Name + "/"
		lo, hi := []byte(prefix), state.Upper(prefix)
		inIndex := drive >= 0
		// Where the walk's own order is the order asked for (row id within
		// one value of an equality, or the rows themselves), the page is
		// read as it is walked and the walk stops past it.
		streams := !in.Desc && ((drive < 0 && in.OrderBy == "") ||
			(drive >= 0 && filters[drive].op == "eq" && (in.OrderBy == "" || in.OrderBy == filters[drive].col)))
		if inIndex {
			f := filters[drive]
			prefix = indexPrefix(art.ID, coll.Name, f.col)
			lo, hi = []byte(prefix), state.Upper(prefix)
			switch f.op {
			case "eq":
				lo, hi = []byte(prefix+f.enc+"\x00"), []byte(prefix+f.enc+"\x01")
			case "gt":
				lo = []byte(prefix + f.enc + "\x01")
			case "gte":
				lo = []byte(prefix + f.enc + "\x00")
			case "lt":
				hi = []byte(prefix + f.enc + "\x00")
			case "lte":
				hi = []byte(prefix + f.enc + "\x01")
			}
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		var rows []*row
		for it.First(); it.Valid(); it.Next() {
			if streams && len(rows) > offset+limit {
				break
			}
			var rw *row
			if inIndex {
				k := string(it.Key())
				if rw, err = readRow(r, art.ID, coll.Name, k[strings.LastIndexByte(k, 0)+1:]); err != nil {
					it.Close()
					return err
				}
			} else {
				rw = new(row)
				if err := state.DecodeJSON(it.Key(), it.Value(), rw); err != nil {
					it.Close()
					return err
				}
			}
			if rw != nil && match(rw) && rf.visible(coll, rw) {
				rows = append(rows, rw)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		if !streams {
			sortRows(rows, in.OrderBy, in.Desc)
		}
		offset = min(offset, len(rows))
		end := min(len(rows), offset+limit)
		for _, rw := range rows[offset:end] {
			out.Rows = append(out.Rows, fenceRow(e, rw))
		}
		if end < len(rows) {
			out.NextCursor = fmt.Sprintf("o%d", end)
		}
		return nil
	})
	if err != nil {
		return queryOut{}, err
	}
	out.Provenance = e.Provenance()
	s.enter(ctx, c, art.ID, viewing, "collection "+coll.Name)
	return out, nil
}

// sortRows orders rows by a column (rows without it last), then by id.
func sortRows(rows []*row, col string, desc bool) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if col != "" {
			ea, oka := encodeValue(a.Data[col])
			eb, okb := encodeValue(b.Data[col])
			if oka != okb {
				return oka
			}
			if ea != eb {
				return (ea < eb) != desc
			}
		}
		return (a.Doc < b.Doc) != (desc && col == "")
	})
}
