package artifacts

import (
	"encoding/json"
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

// An artifact's datastore (ART-3, ART-8): collections of rows, each
// collection with its columns and its rules — who reads and who writes
// its rows, whether only people write them (humans_only, for approvals),
// whether rows are only ever added (append_only), which columns never
// change once set (immutable), what every row must satisfy (conditions),
// and which column names the one viewer a row is for
// (assigned_to_viewer).

// Bounds (OUT-2).
const (
	maxCollections = 50
	maxColumns     = 100
	maxConditions  = 50
	maxRowBytes    = 64 << 10
	maxOps         = 100
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

var columnTypes = []string{"any", "string", "number", "boolean", "list"}

type column struct {
	Name      string `json:"name" jsonschema:"the column's name: lower-case letters, digits and _"`
	Type      string `json:"type,omitempty" jsonschema:"string, number, boolean, list or any (the default)"`
	Indexed   bool   `json:"indexed,omitempty" jsonschema:"query_artifact_data may filter and order on it (string, number or boolean)"`
	Protected bool   `json:"protected,omitempty" jsonschema:"only a person may drop it"`
}

type condition struct {
	Column   string   `json:"column" jsonschema:"the column the condition is on"`
	OneOf    []any    `json:"one_of,omitempty" jsonschema:"the values it may hold"`
	Min      *float64 `json:"min,omitempty" jsonschema:"the least number it may hold"`
	Max      *float64 `json:"max,omitempty" jsonschema:"the greatest number it may hold"`
	Required bool     `json:"required,omitempty" jsonschema:"every row holds a value in it"`
}

type collection struct {
	Name       string      `json:"name" jsonschema:"the collection's name: lower-case letters, digits and _"`
	Columns    []column    `json:"columns" jsonschema:"its columns; a row holds no field that is not one"`
	Read       string      `json:"read,omitempty" jsonschema:"the least role that reads its rows: viewer (the default), contributor, editor or owner"`
	Write      string      `json:"write,omitempty" jsonschema:"the least role that writes its rows: viewer, contributor (the default), editor or owner"`
	HumansOnly bool        `json:"humans_only,omitempty" jsonschema:"only people write its rows, never an agent (approvals)"`
	AppendOnly bool        `json:"append_only,omitempty" jsonschema:"rows are only ever added: none is changed or deleted"`
	Immutable  []string    `json:"immutable,omitempty" jsonschema:"columns whose value never changes once a row holds one"`
	Conditions []condition `json:"conditions,omitempty" jsonschema:"what every row written must satisfy"`
	// AssignedToViewer names a column holding a seat's handle: below
	// editor, a reader sees and a writer writes only the rows it names.
	AssignedToViewer string `json:"assigned_to_viewer,omitempty" jsonschema:"a string column naming the seat each row is for: below editor, one reads and writes only the rows assigned to them"`
}

type schema struct {
	Collections []collection `json:"collections"`
	Version     int          `json:"version"`
}

func (c *collection) readRole() authority.ArtifactRole { return roleOr(c.Read, authority.RoleViewer) }
func (c *collection) writeRole() authority.ArtifactRole {
	return roleOr(c.Write, authority.RoleContributor)
}

func roleOr(s string, def authority.ArtifactRole) authority.ArtifactRole {
	if r, ok := authority.ParseArtifactRole(s); ok && r != authority.RoleNone {
		return r
	}
	return def
}

func (c *collection) column(name string) *column {
	for i := range c.Columns {
		if c.Columns[i].Name == name {
			return &c.Columns[i]
		}
	}
	return nil
}

func (sc *schema) collection(name string) *collection {
	for i := range sc.Collections {
		if sc.Collections[i].Name == name {
			return &sc.Collections[i]
		}
	}
	return nil
}

func readSchema(r pebble.Reader, id string) (*schema, error) {
	var sc schema
	if _, err := state.GetJSON(r, kSchema+id, &sc); err != nil {
		return nil, err
	}
	return &sc, nil
}

// check refuses a schema that is not well formed, naming what is wrong.
func (sc *schema) check() error {
	bad := func(format string, args ...any) error {
		return authority.Refuse(authority.Invalid, format, args...).WithData("argument", "collections")
	}
	if len(sc.Collections) > maxCollections {
		return bad("a datastore keeps at most %d collections; this names %d.", maxCollections, len(sc.Collections))
	}
	seen := map[string]bool{}
	for i := range sc.Collections {
		c := &sc.Collections[i]
		if !nameRE.MatchString(c.Name) {
			return bad("collection name %q is not lower-case letters, digits and _, starting with a letter.", c.Name)
		}
		if seen[c.Name] {
			return bad("collection %s is named twice.", c.Name)
		}
		seen[c.Name] = true
		if len(c.Columns) == 0 || len(c.Columns) > maxColumns {
			return bad("collection %s has %d columns; it needs 1 to %d.", c.Name, len(c.Columns), maxColumns)
		}
		cols := map[string]bool{}
		for j := range c.Columns {
			col := &c.Columns[j]
			if col.Type == "" {
				col.Type = "any"
			}
			switch {
			case !nameRE.MatchString(col.Name):
				return bad("column name %q in %s is not lower-case letters, digits and _.", col.Name, c.Name)
			case cols[col.Name]:
				return bad("column %s.%s is named twice.", c.Name, col.Name)
			case !slices.Contains(columnTypes, col.Type):
				return bad("column %s.%s has type %q, not one of %s.", c.Name, col.Name, col.Type, strings.Join(columnTypes, ", "))
			case col.Indexed && (col.Type == "list" || col.Type == "any"):
				return bad("column %s.%s is indexed, so its type is string, number or boolean.", c.Name, col.Name)
			}
			cols[col.Name] = true
		}
		for _, rr := range []struct{ field, v string }{{"read", c.Read}, {"write", c.Write}} {
			if r, ok := authority.ParseArtifactRole(rr.v); rr.v != "" && (!ok || r == authority.RoleNone) {
				return bad("%s.%s is %q, not viewer, contributor, editor or owner.", c.Name, rr.field, rr.v)
			}
		}
		for _, im := range c.Immutable {
			if !cols[im] {
				return bad("%s.immutable names %s, which is no column of it.", c.Name, im)
			}
		}
		if len(c.Conditions) > maxConditions {
			return bad("%s has %d conditions; at most %d.", c.Name, len(c.Conditions), maxConditions)
		}
		for _, cond := range c.Conditions {
			if !cols[cond.Column] {
				return bad("a condition of %s names %s, which is no column of it.", c.Name, cond.Column)
			}
		}
		if a := c.AssignedToViewer; a != "" {
			if col := c.column(a); col == nil || (col.Type != "string" && col.Type != "any") {
				return bad("%s.assigned_to_viewer names %s, which is no string column of it.", c.Name, a)
			}
		}
	}
	return nil
}

// loosenings lists what a new schema lifts of the old one's rules: what
// an agent may not do, and a person may (ART-8). Adding a collection, a
// column, a condition or a rule is tightening and never listed.
func loosenings(old, now *schema) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for i := range old.Collections {
		o := &old.Collections[i]
		n := now.collection(o.Name)
		if n == nil {
			add("drops the collection %s", o.Name)
			continue
		}
		if n.readRole() < o.readRole() {
			add("lowers %s.read from %s to %s", o.Name, o.readRole(), n.readRole())
		}
		if n.writeRole() < o.writeRole() {
			add("lowers %s.write from %s to %s", o.Name, o.writeRole(), n.writeRole())
		}
		if o.HumansOnly && !n.HumansOnly {
			add("lifts humans_only from %s", o.Name)
		}
		if o.AppendOnly && !n.AppendOnly {
			add("lifts append_only from %s", o.Name)
		}
		for _, im := range o.Immutable {
			if !slices.Contains(n.Immutable, im) {
				add("lifts the immutability of %s.%s", o.Name, im)
			}
		}
		for _, c := range o.Conditions {
			if !slices.ContainsFunc(n.Conditions, func(x condition) bool { return reflect.DeepEqual(x, c) }) {
				b, _ := json.Marshal(c)
				add("removes the condition %s from %s", b, o.Name)
			}
		}
		if o.AssignedToViewer != "" && n.AssignedToViewer != o.AssignedToViewer {
			add("points %s.assigned_to_viewer at %q instead of %s", o.Name, n.AssignedToViewer, o.AssignedToViewer)
		}
		for _, col := range o.Columns {
			if !col.Protected {
				continue
			}
			if nc := n.column(col.Name); nc == nil {
				add("drops the protected column %s.%s", o.Name, col.Name)
			} else if !nc.Protected {
				add("lifts the protection of %s.%s", o.Name, col.Name)
			}
		}
	}
	return out
}

// row is one datastore row.
type row struct {
	Doc       string         `json:"doc"`
	Data      map[string]any `json:"data"`
	Version   int            `json:"version"`
	CreatedBy servers.Author `json:"created_by"`
	UpdatedBy servers.Author `json:"updated_by"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	Pos       uint64         `json:"pos"`
}

func rowKey(id, coll, doc string) string { return kRow + id + "/" + coll + "/" + doc }

func readRow(r pebble.Reader, id, coll, doc string) (*row, error) {
	var rw row
	found, err := state.GetJSON(r, rowKey(id, coll, doc), &rw)
	if err != nil || !found {
		return nil, err
	}
	return &rw, nil
}

// assignee is whom a row is assigned to in its collection ("" for none).
func (c *collection) assignee(data map[string]any) string {
	if c.AssignedToViewer == "" {
		return ""
	}
	s, _ := data[c.AssignedToViewer].(string)
	return strings.TrimPrefix(s, "@")
}

// reader is one party a row must be readable by.
type reader struct {
	role authority.ArtifactRole
	who  string
}

// rowFilter says which rows a call may be answered: each row must be
// readable by the seat and by whom its turn acts for (ART-3), or (the
// admin path, recorded) all of them.
type rowFilter struct {
	all     bool
	readers []reader
}

func (s *srv) rowFilter(acc access) rowFilter {
	if acc.AdminPath {
		return rowFilter{all: true}
	}
	f := rowFilter{readers: []reader{{acc.SeatRole, acc.seat}}}
	if acc.ask.Kind == authority.KindAgent && acc.ask.Requester == authority.RequesterKnown {
		f.readers = append(f.readers, reader{acc.ask.RequesterRole, acc.requester})
	}
	return f
}

func (f rowFilter) visible(c *collection, rw *row) bool {
	if f.all {
		return true
	}
	for _, rd := range f.readers {
		if !authority.RowVisible(c.readRole(), c.AssignedToViewer != "", c.assignee(rw.Data), rd.role, rd.who) {
			return false
		}
	}
	return true
}

// rowOut is a row as a data tool answers it: its fields fenced as text
// its creator and last writer wrote (artifact_row, WR-10).
type rowOut struct {
	Doc       string    `json:"doc"`
	Version   int       `json:"version"`
	Data      string    `json:"data"`
	CreatedBy string    `json:"created_by"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
}

func fenceRow(e *servers.Envelope, rw *row) rowOut {
	b, _ := json.Marshal(rw.Data)
	authors := []servers.Author{rw.CreatedBy}
	if rw.UpdatedBy != rw.CreatedBy {
		authors = append(authors, rw.UpdatedBy)
	}
	return rowOut{Doc: rw.Doc, Version: rw.Version, Data: e.FenceAs("artifact_row", string(b), authors),
		CreatedBy: rw.CreatedBy.Seat, UpdatedBy: rw.UpdatedBy.Seat, UpdatedAt: rw.UpdatedAt}
}
