package tracker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// ---- list_projects / get_project ----

type projectOut struct {
	Key             string         `json:"key"`
	Name            string         `json:"name"`
	Unit            string         `json:"unit,omitempty"`
	Lead            string         `json:"lead,omitempty"`
	DefaultAssignee string         `json:"default_assignee,omitempty"`
	Labels          []string       `json:"labels,omitempty"`
	Items           map[string]int `json:"items_by_status,omitempty"`
	Version         int            `json:"version"`
	Yours           bool           `json:"yours,omitempty"`
}

type listProjectsIn struct{}

type listProjectsOut struct {
	Projects []projectOut `json:"projects"`
}

// projects answers every project: those the directory's units declare (a
// project exists from its declaration, before anything is filed in it) and
// any the board holds beyond them.
func (s *srv) projects(r pebble.Reader, c authority.Caller) ([]projectOut, error) {
	mine := ""
	if seat, ok := s.dir().Seat(c.Seat); ok {
		if u, ok := s.dir().Unit(seat.Unit); ok {
			mine = strings.ToUpper(u.Project)
		}
	}
	byKey := map[string]projectOut{}
	for _, u := range s.dir().Units() {
		if u.Project == "" {
			continue
		}
		d := declOf(u)
		byKey[d.Key] = projectOut{Key: d.Key, Name: d.Name, Unit: d.Unit, Lead: d.Lead}
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kProject), UpperBound: []byte("trk/proj0")})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		var p project
		if err := json.Unmarshal(it.Value(), &p); err != nil {
			it.Close()
			return nil, err
		}
		o := byKey[p.Key]
		o.Key, o.DefaultAssignee, o.Labels, o.Items, o.Version = p.Key, p.DefaultAssignee, p.Labels, p.Counts, p.Version
		o.Name = p.Name
		if o.Unit == "" {
			o.Unit, o.Lead = p.Unit, s.lead(projectDecl{Key: p.Key, Lead: p.Lead})
		}
		byKey[p.Key] = o
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	out := make([]projectOut, 0, len(byKey))
	for _, p := range byKey {
		p.Yours = p.Key == mine
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *srv) listProjects(_ context.Context, c authority.Caller, _ listProjectsIn) (listProjectsOut, error) {
	var out listProjectsOut
	err := s.view(func(r pebble.Reader) error {
		ps, err := s.projects(r, c)
		out.Projects = ps
		return err
	})
	return out, err
}

type getProjectIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
}

func (s *srv) getProject(_ context.Context, c authority.Caller, in getProjectIn) (projectOut, error) {
	var out projectOut
	err := s.view(func(r pebble.Reader) error {
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			if in.Project != "" && errors.Is(err, authority.ErrInvalid) {
				return authority.Refuse(authority.NotFound, "No project has the key %s (list_projects shows them).", strings.ToUpper(in.Project))
			}
			return err
		}
		ps, err := s.projects(r, c)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Key == d.Key {
				out = p
			}
		}
		return nil
	})
	return out, err
}

// ---- write_project ----

type writeProjectIn struct {
	Project         string    `json:"project" jsonschema:"project key"`
	Name            *string   `json:"name,omitempty" jsonschema:"the project's display name (lead only)"`
	DefaultAssignee *string   `json:"default_assignee,omitempty" jsonschema:"handle that new unassigned items go to; empty sends them to triage for the lead (lead only)"`
	Labels          *[]string `json:"labels,omitempty" jsonschema:"the project's whole set of labels; anybody may add labels, removing one is the lead's"`
	OpID            string    `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type writeProjectOut struct {
	writeOut
	Project string   `json:"project,omitempty"`
	Version int      `json:"version,omitempty"`
	Labels  []string `json:"labels,omitempty"`
}

var labelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.:-]{0,47}$`)

func (s *srv) writeProject(ctx context.Context, c authority.Caller, in writeProjectIn) (writeProjectOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "write_project", in, given, true)
	if err != nil {
		return writeProjectOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		pl := projectPayload{common: oc.common, Name: in.Name}
		err = s.view(func(r pebble.Reader) error {
			if strings.TrimSpace(in.Project) == "" {
				return authority.Refuse(authority.Invalid, "project is empty; name the project to write.")
			}
			d, p, err := s.resolveProject(r, c, in.Project)
			if err != nil {
				return err
			}
			pl.Project = d
			lead := s.mayLead(c, d)
			if (in.Name != nil || in.DefaultAssignee != nil) && !lead {
				return authority.Refuse(authority.Forbidden, "Only %s's lead (%s) may rename it or set its default assignee; ask them.", d.Key, orNone(s.lead(d)))
			}
			if in.DefaultAssignee != nil && *in.DefaultAssignee != "" {
				h, err := s.seatArg("default_assignee", *in.DefaultAssignee)
				if err != nil {
					return err
				}
				pl.DefaultAssignee = &h
			} else {
				pl.DefaultAssignee = in.DefaultAssignee
			}
			if in.Labels != nil {
				labels := dedupe(*in.Labels)
				for _, l := range labels {
					if !labelRE.MatchString(l) {
						return authority.Refuse(authority.Invalid, "labels holds %q; a label is lower-case letters, digits and _ . : -, up to 48 characters.", l)
					}
				}
				if p != nil && !lead {
					for _, l := range p.Labels {
						if !slices.Contains(labels, l) {
							return authority.Refuse(authority.Forbidden, "labels leaves out %q; removing a label is %s's lead's (%s). Send the whole set with it kept.", l, d.Key, orNone(s.lead(d)))
						}
					}
				}
				if labels == nil {
					labels = []string{}
				}
				pl.Labels = &labels
			}
			return nil
		})
		if err != nil {
			return writeProjectOut{}, err
		}
		a, err = s.write(ctx, oc, kindProject, pl)
	}
	if errors.Is(err, errUnknown) {
		return writeProjectOut{}, s.unknownRefusal(oc, "the project write", "")
	}
	if err != nil {
		return writeProjectOut{}, err
	}
	out := writeProjectOut{writeOut: oc.out(a), Project: strings.ToUpper(in.Project)}
	if a.Outcome == state.Applied {
		var res projectResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return writeProjectOut{}, err
		}
		out.Project, out.Version, out.Labels = res.Key, res.Version, res.Labels
	}
	return out, nil
}

// ---- get_work_catalogue / write_work_catalogue ----

type getCatalogueIn struct{}

func (s *srv) getWorkCatalogue(_ context.Context, _ authority.Caller, _ getCatalogueIn) (catalogue, error) {
	var out catalogue
	err := s.view(func(r pebble.Reader) error {
		var err error
		out, err = readCatalogue(r)
		return err
	})
	return out, err
}

type writeCatalogueIn struct {
	Statuses   []statusDef `json:"statuses" jsonschema:"every status, in board order; at least one open and one done"`
	Priorities []string    `json:"priorities" jsonschema:"every priority, lowest first"`
	OpID       string      `json:"op_id,omitempty" jsonschema:"the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type writeCatalogueOut struct {
	writeOut
	Version int `json:"version,omitempty"`
}

var keyWordRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

func (s *srv) writeWorkCatalogue(ctx context.Context, c authority.Caller, in writeCatalogueIn) (writeCatalogueOut, error) {
	// The catalogue shapes every project's board: a person's decision,
	// made on the operator surface by an administrator or a unit lead.
	if c.Kind == authority.KindAgent {
		return writeCatalogueOut{}, authority.Refuse(authority.Forbidden, "The work catalogue is written by people, not seats; ask an administrator or a unit lead.")
	}
	if c.Kind == authority.KindHuman && !s.isAdminOrLead(c.Seat) {
		return writeCatalogueOut{}, authority.Refuse(authority.Forbidden, "Only an administrator or a unit lead may write the work catalogue.")
	}
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "write_work_catalogue", in, given, true)
	if err != nil {
		return writeCatalogueOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		cat := catalogue{Statuses: in.Statuses, Priorities: dedupe(in.Priorities)}
		if err := checkCatalogue(cat); err != nil {
			return writeCatalogueOut{}, err
		}
		a, err = s.write(ctx, oc, kindCatalogue, cataloguePayload{common: oc.common, Catalogue: cat})
	}
	if errors.Is(err, errUnknown) {
		return writeCatalogueOut{}, s.unknownRefusal(oc, "the catalogue write", "")
	}
	if err != nil {
		return writeCatalogueOut{}, err
	}
	out := writeCatalogueOut{writeOut: oc.out(a)}
	if a.Outcome == state.Applied {
		var res struct{ Version int }
		_ = json.Unmarshal(a.Result, &res)
		out.Version = res.Version
	}
	return out, nil
}

func (s *srv) isAdminOrLead(handle string) bool {
	if seat, ok := s.dir().Seat(handle); ok && seat.Admin {
		return true
	}
	for _, u := range s.dir().Units() {
		if strings.EqualFold(u.Lead, handle) {
			return true
		}
	}
	return false
}

func checkCatalogue(c catalogue) error {
	seen := map[string]bool{}
	cats := map[string]bool{}
	for _, st := range c.Statuses {
		if !keyWordRE.MatchString(st.Key) {
			return authority.Refuse(authority.Invalid, "statuses holds key %q; a status key is snake_case, up to 32 characters.", st.Key)
		}
		if seen[st.Key] {
			return authority.Refuse(authority.Invalid, "statuses names %q twice.", st.Key)
		}
		seen[st.Key] = true
		switch st.Category {
		case "open", "started", "done", "cancelled":
		default:
			return authority.Refuse(authority.Invalid, "status %q has category %q; a category is open, started, done or cancelled.", st.Key, st.Category)
		}
		cats[st.Category] = true
	}
	if !cats["open"] || !cats["done"] {
		return authority.Refuse(authority.Invalid, "statuses needs at least one open status (where new items start) and one done status.")
	}
	if len(c.Priorities) == 0 {
		return authority.Refuse(authority.Invalid, "priorities is empty; name at least one.")
	}
	for _, p := range c.Priorities {
		if !keyWordRE.MatchString(p) {
			return authority.Refuse(authority.Invalid, "priorities holds %q; a priority is snake_case, up to 32 characters.", p)
		}
	}
	return nil
}

// ---- list_activity / get_activity ----

type listActivityIn struct {
	Project string `json:"project,omitempty" jsonschema:"only this project's activity"`
	Item    string `json:"item,omitempty" jsonschema:"only this item's activity"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many rows, 1 to 200; default 50"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page"`
}

type activityRow struct {
	ID      string `json:"id"`
	At      string `json:"at"`
	Actor   string `json:"actor"`
	Action  string `json:"action"`
	Project string `json:"project,omitempty"`
	Item    string `json:"item,omitempty"`
	Summary string `json:"summary"`
}

type listActivityOut struct {
	Activity   []activityRow `json:"activity"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// listActivityScan bounds how many rows one page may pass over when filters
// match few of them; the cursor lets the caller go on.
const listActivityScan = 20000

func (s *srv) listActivity(_ context.Context, _ authority.Caller, in listActivityIn) (listActivityOut, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 200 {
		return listActivityOut{}, authority.Refuse(authority.Invalid, "limit %d is outside 1 to 200.", in.Limit)
	}
	out := listActivityOut{Activity: []activityRow{}}
	err := s.view(func(r pebble.Reader) error {
		item := ""
		if in.Item != "" {
			it, err := readItem(r, in.Item)
			if err != nil {
				return err
			}
			if it == nil {
				return authority.Refuse(authority.Invalid, "item %s names no work item.", in.Item)
			}
			item = it.Key
		}
		upper := []byte(kActivity + "\xff")
		if in.Cursor != "" {
			b, err := base64.RawURLEncoding.DecodeString(in.Cursor)
			if err != nil || !strings.HasPrefix(string(b), kActivity) {
				return authority.Refuse(authority.Invalid, "cursor is not a next_cursor list_activity answered.")
			}
			upper = b
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kActivity), UpperBound: upper})
		if err != nil {
			return err
		}
		defer it.Close()
		scanned := 0
		for ok := it.Last(); ok; ok = it.Prev() {
			scanned++
			if len(out.Activity) == limit || scanned > listActivityScan {
				// The cursor is an exclusive upper bound, so it points just
				// past this row, which the next page starts with.
				out.NextCursor = base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), it.Key()...), 0))
				break
			}
			var a activity
			if err := json.Unmarshal(it.Value(), &a); err != nil {
				return err
			}
			if (in.Project != "" && !strings.EqualFold(a.Project, in.Project)) || (item != "" && a.Item != item) {
				continue
			}
			out.Activity = append(out.Activity, activityRow{ID: a.ID, At: a.At.Format("2006-01-02T15:04:05.000Z07:00"), Actor: a.Actor.Seat, Action: a.Action, Project: a.Project, Item: a.Item, Summary: a.Summary})
		}
		return nil
	})
	return out, err
}

type getActivityIn struct {
	ID string `json:"id" jsonschema:"an activity id from list_activity (act_...)"`
}

type getActivityOut struct {
	Provenance provenance      `json:"provenance"`
	Activity   activityRow     `json:"activity"`
	Actor      writer          `json:"actor"`
	Change     json.RawMessage `json:"change,omitempty"`
}

func (s *srv) getActivity(_ context.Context, _ authority.Caller, in getActivityIn) (getActivityOut, error) {
	var out getActivityOut
	err := s.view(func(r pebble.Reader) error {
		id, ok := strings.CutPrefix(in.ID, "act_")
		var a activity
		found := false
		if ok {
			var err error
			found, err = getJSON(r, kActivity+id, &a)
			if err != nil {
				return err
			}
		}
		if !found {
			return authority.Refuse(authority.NotFound, "No activity has the id %q.", in.ID)
		}
		var e envelope
		out.Activity = activityRow{ID: a.ID, At: a.At.Format("2006-01-02T15:04:05.000Z07:00"), Actor: a.Actor.Seat, Action: a.Action, Project: a.Project, Item: a.Item, Summary: a.Summary}
		out.Actor = a.Actor
		if len(a.Detail) > 0 {
			// The change record can hold text the actor wrote; every
			// string in it is fenced as theirs.
			var v any
			if err := json.Unmarshal(a.Detail, &v); err != nil {
				return err
			}
			b, err := json.Marshal(fenceStrings(&e, v, a.Actor))
			if err != nil {
				return err
			}
			out.Change = b
		}
		out.Provenance = e.provenance()
		return nil
	})
	return out, err
}

func fenceStrings(e *envelope, v any, w writer) any {
	switch t := v.(type) {
	case string:
		if len(t) > 40 || strings.ContainsAny(t, "\n ") {
			return e.fence(t, []writer{w})
		}
		return t
	case map[string]any:
		for k, x := range t {
			t[k] = fenceStrings(e, x, w)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = fenceStrings(e, x, w)
		}
		return t
	default:
		return v
	}
}
