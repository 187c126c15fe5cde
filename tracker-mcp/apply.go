package tracker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Operation kinds, one projector each.
const (
	kindCreate    = "tracker.item.create"
	kindUpdate    = "tracker.item.update"
	kindLink      = "tracker.item.link"
	kindComment   = "tracker.item.comment"
	kindMerge     = "tracker.item.merge"
	kindMove      = "tracker.item.move"
	kindProject   = "tracker.project.write"
	kindCatalogue = "tracker.catalogue.write"
	kindFileWrite = "tracker.file.write"
	kindFileRm    = "tracker.file.remove"
)

// ReassignmentBudget is how often an item may be handed on after it was
// filed (TRK-5). It stops work bouncing between seats that each decide it is
// somebody else's.
const ReassignmentBudget = 5

// common rides on every payload: the turn a seat's write belongs to and when
// that turn first wrote, so the server can derive the same op ids for the
// turn after a restart (see turnStart).
type common struct {
	Turn      string `json:"turn,omitempty"`
	TurnStart int64  `json:"turn_start,omitempty"`
}

type createPayload struct {
	common
	Project     projectDecl `json:"project"`
	Key         string      `json:"key"` // proposed by the tool; used when still free
	Title       string      `json:"title"`
	Description string      `json:"description,omitempty"`
	Status      string      `json:"status"`
	Assignee    string      `json:"assignee,omitempty"`
	Triage      bool        `json:"triage,omitempty"`
	Priority    string      `json:"priority,omitempty"`
	Labels      []string    `json:"labels,omitempty"`
	Parent      string      `json:"parent,omitempty"`
	Question    *question   `json:"question,omitempty"`
	// Via says how the assignee was chosen: argument, project_default or
	// triage.
	Via string `json:"via"`
}

type checkChange struct {
	Add     string `json:"add,omitempty" jsonschema:"text of a new checklist entry"`
	Check   int    `json:"check,omitempty" jsonschema:"id of an entry to mark done"`
	Uncheck int    `json:"uncheck,omitempty" jsonschema:"id of an entry to mark not done"`
	Remove  int    `json:"remove,omitempty" jsonschema:"id of an entry to remove"`
}

type updatePayload struct {
	common
	Key         string       `json:"key"`
	IfMatch     int          `json:"if_match,omitempty"`
	Title       *string      `json:"title,omitempty"`
	Description *string      `json:"description,omitempty"`
	Status      *string      `json:"status,omitempty"`
	Assignee    *string      `json:"assignee,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Priority    *string      `json:"priority,omitempty"`
	Labels      *[]string    `json:"labels,omitempty"`
	Parent      *string      `json:"parent,omitempty"`
	Checklist   *checkChange `json:"checklist,omitempty"`
}

type linkPayload struct {
	common
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Remove bool   `json:"remove,omitempty"`
}

type commentPayload struct {
	common
	Key      string    `json:"key"`
	Body     string    `json:"body"`
	Mentions []string  `json:"mentions,omitempty"`
	Ask      *question `json:"ask,omitempty"`
	Answers  int       `json:"answers,omitempty"`
	Choice   string    `json:"choice,omitempty"`
}

type mergePayload struct {
	common
	Key  string `json:"key"`
	Into string `json:"into"`
}

type movePayload struct {
	common
	Key string      `json:"key"`
	To  projectDecl `json:"to"`
}

type projectPayload struct {
	common
	Project         projectDecl `json:"project"`
	Name            *string     `json:"name,omitempty"`
	DefaultAssignee *string     `json:"default_assignee,omitempty"`
	Labels          *[]string   `json:"labels,omitempty"`
	AddLabels       []string    `json:"add_labels,omitempty"`
}

type cataloguePayload struct {
	common
	Catalogue catalogue `json:"catalogue"`
}

type fileWritePayload struct {
	common
	Project   projectDecl `json:"project"`
	Path      string      `json:"path"`
	Type      string      `json:"type"`
	Content   []byte      `json:"content"`
	IfVersion int         `json:"if_version,omitempty"`
}

type fileRemovePayload struct {
	common
	Project string `json:"project"`
	Path    string `json:"path"`
}

// Results the projectors record in the op ledger. A retried operation is
// answered from them, so they hold everything the tool's answer needs.
type itemResult struct {
	Key           string            `json:"key"`
	ID            string            `json:"id"`
	Version       int               `json:"version"`
	Project       string            `json:"project,omitempty"`
	Status        string            `json:"status,omitempty"`
	Assignee      string            `json:"assignee,omitempty"`
	Triage        bool              `json:"triage,omitempty"`
	Changed       []string          `json:"changed,omitempty"`
	CommentID     int               `json:"comment_id,omitempty"`
	Mentions      []string          `json:"mentions,omitempty"`
	AlreadyPosted bool              `json:"already_posted,omitempty"`
	Rekeyed       map[string]string `json:"rekeyed,omitempty"`
	Reparented    []string          `json:"reparented,omitempty"`
	Unchanged     bool              `json:"unchanged,omitempty"`
	Via           string            `json:"via,omitempty"`
	Question      bool              `json:"question,omitempty"`
}

type projectResult struct {
	Key     string   `json:"key"`
	Version int      `json:"version"`
	Labels  []string `json:"labels,omitempty"`
	Added   []string `json:"added,omitempty"`
}

type fileResult struct {
	Project string `json:"project"`
	Path    string `json:"path"`
	Version int    `json:"version"`
	Size    int    `json:"size"`
	Removed bool   `json:"removed,omitempty"`
}

// projector adapts one apply function to state.Projector.
type projector struct {
	name  string
	apply func(a *applier) (any, error)
}

func (p projector) Name() string { return p.name }

func (p projector) Apply(b *pebble.Batch, r pebble.Reader, pos uint64, op state.Op) (json.RawMessage, error) {
	a := &applier{b: b, r: r, pos: pos, op: op, by: writerOf(op.Caller)}
	var c common
	if err := json.Unmarshal(op.Payload, &c); err != nil {
		return nil, fmt.Errorf("decode payload of %s: %w", op.Kind, err)
	}
	if c.Turn != "" && c.TurnStart != 0 {
		if ok, err := exists(r, kTurn+c.Turn); err != nil {
			return nil, err
		} else if !ok {
			if err := b.Set([]byte(kTurn+c.Turn), binary.BigEndian.AppendUint64(nil, uint64(c.TurnStart)), nil); err != nil {
				return nil, err
			}
		}
	}
	res, err := p.apply(a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Projectors returns the tracker's projectors; the hub registers them when
// it opens the state node.
func Projectors() []state.Projector {
	return []state.Projector{
		projector{kindCreate, applyCreate},
		projector{kindUpdate, applyUpdate},
		projector{kindLink, applyLink},
		projector{kindComment, applyComment},
		projector{kindMerge, applyMerge},
		projector{kindMove, applyMove},
		projector{kindProject, applyProject},
		projector{kindCatalogue, applyCatalogue},
		projector{kindFileWrite, applyFileWrite},
		projector{kindFileRm, applyFileRemove},
	}
}

// applier is one operation being applied.
type applier struct {
	b    *pebble.Batch
	r    pebble.Reader
	pos  uint64
	op   state.Op
	by   writer
	acts int
}

func (a *applier) at() time.Time { return a.op.At.UTC() }

func (a *applier) payload(v any) error {
	if err := json.Unmarshal(a.op.Payload, v); err != nil {
		return fmt.Errorf("decode payload of %s: %w", a.op.Kind, err)
	}
	return nil
}

func (a *applier) activity(action, proj, key, sum string, detail any) error {
	a.acts++
	id := fmt.Sprintf("%016x.%04d", a.pos, a.acts)
	row := activity{ID: "act_" + id, At: a.at(), Actor: a.by, Action: action, Project: proj, Item: key, Summary: sum}
	if detail != nil {
		d, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		row.Detail = d
	}
	return setJSON(a.b, kActivity+id, row)
}

// ensureProject returns the project row, creating it from decl when this is
// the first write that needs it.
func (a *applier) ensureProject(decl projectDecl) (*project, error) {
	p, err := readProject(a.r, decl.Key)
	if err != nil || p != nil {
		return p, err
	}
	if decl.Key == "" {
		return nil, authority.Refuse(authority.Invalid, "project names no project.")
	}
	name := decl.Name
	if name == "" {
		name = decl.Key
	}
	p = &project{Key: decl.Key, Name: name, Unit: decl.Unit, Lead: decl.Lead, Version: 1, CreatedAt: a.at()}
	return p, a.putProject(p)
}

func (a *applier) putProject(p *project) error { return setJSON(a.b, kProject+p.Key, p) }

// putItem writes an item and keeps its summary and indexes in step with it.
// old is the item as it was (nil for a new one).
func (a *applier) putItem(old, it *item) error {
	if old != nil {
		if err := a.unindex(old); err != nil {
			return err
		}
	}
	if err := setJSON(a.b, kItem+it.Key, it); err != nil {
		return err
	}
	if err := setJSON(a.b, kSummary+it.Key, it.summary()); err != nil {
		return err
	}
	set := func(k string) error { return a.b.Set([]byte(k), nil, nil) }
	num := pad(it.Number)
	for _, k := range []string{
		kIxProject + it.Project + "/" + num,
		kIxStatus + it.Project + "/" + it.Status + "/" + num,
		kIxAssign + it.Assignee + "/" + it.Project + "/" + num,
		kIxPrio + it.Priority + "/" + it.Project + "/" + num,
		kIxStatAll + it.Status + "/" + it.Project + "/" + num,
	} {
		if err := set(k); err != nil {
			return err
		}
	}
	if it.Parent != "" {
		if err := set(kIxChild + it.Parent + "/" + it.Key); err != nil {
			return err
		}
	}
	for _, l := range it.Labels {
		if err := set(kIxLabel + l + "/" + it.Project + "/" + num); err != nil {
			return err
		}
	}
	if err := setJSON(a.b, kID+it.ID, it.Key); err != nil {
		return err
	}
	if err := a.count(it.Project, it.Status, +1); err != nil {
		return err
	}
	return a.indexText(it)
}

func (a *applier) unindex(old *item) error {
	del := func(k string) error { return a.b.Delete([]byte(k), nil) }
	num := pad(old.Number)
	for _, k := range []string{
		kIxProject + old.Project + "/" + num,
		kIxStatus + old.Project + "/" + old.Status + "/" + num,
		kIxAssign + old.Assignee + "/" + old.Project + "/" + num,
		kIxPrio + old.Priority + "/" + old.Project + "/" + num,
		kIxStatAll + old.Status + "/" + old.Project + "/" + num,
	} {
		if err := del(k); err != nil {
			return err
		}
	}
	if old.Parent != "" {
		if err := del(kIxChild + old.Parent + "/" + old.Key); err != nil {
			return err
		}
	}
	for _, l := range old.Labels {
		if err := del(kIxLabel + l + "/" + old.Project + "/" + num); err != nil {
			return err
		}
	}
	if err := a.count(old.Project, old.Status, -1); err != nil {
		return err
	}
	return a.unindexText(old)
}

func (a *applier) count(proj, status string, delta int) error {
	p, err := readProject(a.r, proj)
	if err != nil || p == nil {
		return err
	}
	if p.Counts == nil {
		p.Counts = map[string]int{}
	}
	p.Counts[status] += delta
	if p.Counts[status] <= 0 {
		delete(p.Counts, status)
	}
	return a.putProject(p)
}

func (a *applier) children(key string) ([]string, error) {
	it, err := a.r.NewIter(&pebble.IterOptions{LowerBound: []byte(kIxChild + key + "/"), UpperBound: []byte(kIxChild + key + "0")})
	if err != nil {
		return nil, err
	}
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, strings.TrimPrefix(string(it.Key()), kIxChild+key+"/"))
	}
	return out, it.Close()
}

func (a *applier) history(it *item, field, change string) {
	it.History = append(it.History, historyRow{At: a.at(), By: a.by.Seat, Field: field, Change: change})
}

func invalidf(format string, args ...any) error {
	return authority.Refuse(authority.Invalid, format, args...)
}

func checkLabels(p *project, labels []string) error {
	var missing []string
	for _, l := range labels {
		if !slices.Contains(p.Labels, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return invalidf("labels names %s, which project %s has not declared. Declare them with write_project, or send labels_create_missing: true.", strings.Join(missing, ", "), p.Key)
	}
	return nil
}

func applyCreate(a *applier) (any, error) {
	var pl createPayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	cat, err := readCatalogue(a.r)
	if err != nil {
		return nil, err
	}
	if _, ok := cat.status(pl.Status); !ok {
		return nil, invalidf("status %q is not in the work catalogue (%s).", pl.Status, strings.Join(cat.statusKeys(), ", "))
	}
	if err := checkLabels(p, pl.Labels); err != nil {
		return nil, err
	}
	if pl.Parent != "" {
		parent, err := readItem(a.r, pl.Parent)
		if err != nil {
			return nil, err
		}
		if parent == nil {
			return nil, invalidf("parent %s names no work item.", pl.Parent)
		}
		pl.Parent = parent.Key
	}
	// The tool proposed a key so a lost acknowledgement can still name it;
	// it is used unless another write took that number first.
	number := p.Next + 1
	if proj, n, ok := parseKey(pl.Key); ok && proj == p.Key && n > 0 {
		taken, err := exists(a.r, kItem+pl.Key)
		if err != nil {
			return nil, err
		}
		aliased, err := exists(a.r, kAlias+pl.Key)
		if err != nil {
			return nil, err
		}
		if !taken && !aliased {
			number = n
		}
	}
	p.Next = max(p.Next, number)
	if err := a.putProject(p); err != nil {
		return nil, err
	}
	it := &item{
		ID: fmt.Sprintf("wi_%x", a.pos), Key: itemKey(p.Key, number), Project: p.Key, Number: number,
		Title: pl.Title, Description: pl.Description, Status: pl.Status, Assignee: pl.Assignee,
		Triage: pl.Triage, Priority: pl.Priority, Labels: pl.Labels, Parent: pl.Parent,
		Question: pl.Question, Version: 1, CreatedBy: a.by, CreatedAt: a.at(), UpdatedAt: a.at(),
	}
	if pl.Description != "" {
		it.DescribedBy = []writer{a.by}
	}
	a.history(it, "created", fmt.Sprintf("filed in %s as %s, assigned to %s", p.Key, it.Status, orNone(it.Assignee)))
	if err := a.putItem(nil, it); err != nil {
		return nil, err
	}
	if it.Question != nil && it.Question.To != "" {
		if err := a.wake(it.Question.To, it.Key, 0); err != nil {
			return nil, err
		}
	}
	if err := a.activity("created", p.Key, it.Key, fmt.Sprintf("filed %s (title %d bytes, description %d bytes)", it.Key, len(it.Title), len(it.Description)),
		map[string]any{"title": it.Title, "description": it.Description, "assignee": it.Assignee, "status": it.Status}); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, Project: it.Project, Status: it.Status, Assignee: it.Assignee, Triage: it.Triage, Via: pl.Via, Question: it.Question != nil}, nil
}

func (a *applier) wake(seat, key string, commentID int) error {
	a.acts++
	return setJSON(a.b, fmt.Sprintf("%s%016x/%04d", kWake, a.pos, a.acts), wake{Seat: seat, Item: key, Comment: commentID, By: a.by.Seat, At: a.at()})
}

func (a *applier) mustItem(key string) (*item, error) {
	it, err := readItem(a.r, key)
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, authority.Refuse(authority.NotFound, "No work item has the key %s.", key)
	}
	return it, nil
}

func clone(it *item) *item {
	c := *it
	c.Labels = slices.Clone(it.Labels)
	c.Links = slices.Clone(it.Links)
	c.Checklist = slices.Clone(it.Checklist)
	c.Thread = slices.Clone(it.Thread)
	c.History = slices.Clone(it.History)
	c.DescribedBy = slices.Clone(it.DescribedBy)
	c.OldKeys = slices.Clone(it.OldKeys)
	return &c
}

func applyUpdate(a *applier) (any, error) {
	var pl updatePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	if pl.IfMatch != 0 && pl.IfMatch != old.Version {
		return nil, authority.Refuse(authority.StaleVersion, "%s is at version %d, not %d: somebody changed it after you read it. Read it again and decide from what it says now.", old.Key, old.Version, pl.IfMatch).WithData("version", old.Version)
	}
	if old.MergedInto != "" {
		return nil, invalidf("%s was merged into %s and is closed; change %s instead.", old.Key, old.MergedInto, old.MergedInto)
	}
	it := clone(old)
	var changed []string
	mark := func(field, change string) {
		changed = append(changed, field)
		a.history(it, field, change)
	}
	if pl.Title != nil && *pl.Title != it.Title {
		mark("title", describeText(it.Title, *pl.Title))
		it.Title = *pl.Title
	}
	if pl.Description != nil && *pl.Description != it.Description {
		mark("description", describeText(it.Description, *pl.Description))
		it.Description = *pl.Description
		if !slices.Contains(it.DescribedBy, a.by) {
			it.DescribedBy = append(it.DescribedBy, a.by)
		}
	}
	if pl.Status != nil && *pl.Status != it.Status {
		cat, err := readCatalogue(a.r)
		if err != nil {
			return nil, err
		}
		if _, ok := cat.status(*pl.Status); !ok {
			return nil, invalidf("status %q is not in the work catalogue (%s).", *pl.Status, strings.Join(cat.statusKeys(), ", "))
		}
		mark("status", it.Status+" -> "+*pl.Status)
		it.Status = *pl.Status
	}
	if pl.Assignee != nil && *pl.Assignee != it.Assignee {
		if it.Reassignments >= ReassignmentBudget {
			return nil, authority.Refuse(authority.ReassignmentBudget, "%s has been reassigned %d times, its whole budget; do not reassign it again. Work it, or say in its thread what is blocking it.", it.Key, it.Reassignments)
		}
		change := orNone(it.Assignee) + " -> " + orNone(*pl.Assignee)
		if pl.Reason != "" {
			change += fmt.Sprintf(" (reason given, %d bytes)", len(pl.Reason))
		}
		mark("assignee", change)
		it.Assignee, it.Triage = *pl.Assignee, false
		it.Reassignments++
		if pl.Reason != "" {
			// The reason is for the new assignee to read, so it goes where
			// they read: the thread, naming them.
			it.Thread = append(it.Thread, comment{ID: len(it.Thread) + 1, By: a.by, At: a.at(), Body: pl.Reason, Mentions: nonEmpty(it.Assignee)})
		}
		if it.Assignee != "" {
			if err := a.wake(it.Assignee, it.Key, 0); err != nil {
				return nil, err
			}
		}
	}
	if pl.Priority != nil && *pl.Priority != it.Priority {
		mark("priority", orNone(it.Priority)+" -> "+*pl.Priority)
		it.Priority = *pl.Priority
	}
	if pl.Labels != nil && describeSet(it.Labels, *pl.Labels) != "" {
		p, err := readProject(a.r, it.Project)
		if err != nil {
			return nil, err
		}
		if p != nil {
			if err := checkLabels(p, *pl.Labels); err != nil {
				return nil, err
			}
		}
		mark("labels", describeSet(it.Labels, *pl.Labels))
		it.Labels = slices.Clone(*pl.Labels)
	}
	if pl.Parent != nil && *pl.Parent != it.Parent {
		if *pl.Parent != "" {
			parent, err := readItem(a.r, *pl.Parent)
			if err != nil {
				return nil, err
			}
			if parent == nil {
				return nil, invalidf("parent %s names no work item.", *pl.Parent)
			}
			if parent.Key == it.Key || parent.Parent == it.Key {
				return nil, invalidf("parent %s would make %s its own ancestor.", parent.Key, it.Key)
			}
			*pl.Parent = parent.Key
		}
		mark("parent", orNone(it.Parent)+" -> "+orNone(*pl.Parent))
		it.Parent = *pl.Parent
	}
	if c := pl.Checklist; c != nil {
		if err := applyChecklist(it, c, mark); err != nil {
			return nil, err
		}
	}
	if len(changed) == 0 {
		return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, Unchanged: true}, nil
	}
	it.Version++
	it.UpdatedAt = a.at()
	if err := a.putItem(old, it); err != nil {
		return nil, err
	}
	if err := a.activity("updated", it.Project, it.Key, fmt.Sprintf("changed %s on %s", strings.Join(changed, ", "), it.Key), pl); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, Status: it.Status, Assignee: it.Assignee, Changed: changed}, nil
}

func applyChecklist(it *item, c *checkChange, mark func(string, string)) error {
	find := func(id int) (int, error) {
		for i, e := range it.Checklist {
			if e.ID == id {
				return i, nil
			}
		}
		return 0, invalidf("checklist names entry %d, which %s does not have.", id, it.Key)
	}
	switch {
	case c.Add != "":
		id := 1
		for _, e := range it.Checklist {
			id = max(id, e.ID+1)
		}
		it.Checklist = append(it.Checklist, checkItem{ID: id, Text: c.Add})
		mark("checklist", fmt.Sprintf("entry %d added (%d bytes)", id, len(c.Add)))
	case c.Check != 0, c.Uncheck != 0:
		id, done := c.Check, true
		if id == 0 {
			id, done = c.Uncheck, false
		}
		i, err := find(id)
		if err != nil {
			return err
		}
		if it.Checklist[i].Done != done {
			it.Checklist[i].Done = done
			mark("checklist", fmt.Sprintf("entry %d marked %s", id, map[bool]string{true: "done", false: "not done"}[done]))
		}
	case c.Remove != 0:
		i, err := find(c.Remove)
		if err != nil {
			return err
		}
		it.Checklist = slices.Delete(it.Checklist, i, i+1)
		mark("checklist", fmt.Sprintf("entry %d removed", c.Remove))
	}
	return nil
}

// inverse is the link the other item carries.
var inverse = map[string]string{
	"waiting_on": "blocks", "blocks": "waiting_on",
	"duplicate_of": "duplicated_by", "duplicated_by": "duplicate_of",
	"relates_to": "relates_to",
}

func applyLink(a *applier) (any, error) {
	var pl linkPayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	from, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	to, err := readItem(a.r, pl.Target)
	if err != nil {
		return nil, err
	}
	if to == nil {
		return nil, invalidf("links names %s, which is no work item.", pl.Target)
	}
	if to.Key == from.Key {
		return nil, invalidf("links names %s itself; an item cannot wait on or duplicate itself.", from.Key)
	}
	edit := func(it *item, kind, other string) bool {
		l := link{Kind: kind, Key: other}
		has := slices.Contains(it.Links, l)
		switch {
		case pl.Remove && has:
			it.Links = slices.DeleteFunc(it.Links, func(x link) bool { return x == l })
			a.history(it, "links", "-"+kind+" "+other)
		case !pl.Remove && !has:
			it.Links = append(it.Links, l)
			a.history(it, "links", "+"+kind+" "+other)
		default:
			return false
		}
		it.Version++
		it.UpdatedAt = a.at()
		return true
	}
	nf, nt := clone(from), clone(to)
	if edit(nf, pl.Kind, to.Key) {
		if err := a.putItem(from, nf); err != nil {
			return nil, err
		}
	}
	if edit(nt, inverse[pl.Kind], from.Key) {
		if err := a.putItem(to, nt); err != nil {
			return nil, err
		}
	}
	verb := "linked"
	if pl.Remove {
		verb = "unlinked"
	}
	if err := a.activity(verb, nf.Project, nf.Key, fmt.Sprintf("%s %s %s %s", verb, nf.Key, pl.Kind, nt.Key), nil); err != nil {
		return nil, err
	}
	return itemResult{Key: nf.Key, ID: nf.ID, Version: nf.Version}, nil
}

func applyComment(a *applier) (any, error) {
	var pl commentPayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	// One comment per item per turn: a re-run turn whose model words the
	// remark differently still posts it once (TRK-4).
	// An answer is exempt: answering twice is refused already_answered, so a
	// re-run cannot double it, and a turn may both remark and answer.
	if pl.Turn != "" && pl.Choice == "" {
		var prior int
		found, err := getJSON(a.r, kTurnNote+old.ID+"/"+pl.Turn, &prior)
		if err != nil {
			return nil, err
		}
		if found {
			return itemResult{Key: old.Key, ID: old.ID, Version: old.Version, CommentID: prior, AlreadyPosted: true}, nil
		}
	}
	it := clone(old)
	id := len(it.Thread) + 1
	c := comment{ID: id, By: a.by, At: a.at(), Body: pl.Body, Mentions: pl.Mentions, Ask: pl.Ask}
	if pl.Choice != "" {
		q, where := it.Question, "the item's own question"
		var target *comment
		if pl.Answers != 0 {
			where = fmt.Sprintf("comment %d", pl.Answers)
			q = nil
			for i := range it.Thread {
				if it.Thread[i].ID == pl.Answers {
					target = &it.Thread[i]
					q = target.Ask
				}
			}
		}
		if q == nil {
			return nil, invalidf("answers names %s, which asks no question.", where)
		}
		if q.Answered {
			return nil, authority.Refuse(authority.AlreadyAnswered, "%s on %s was already answered (%q, by %s); read the answer.", where, it.Key, q.Choice, q.AnswerBy)
		}
		if len(q.Options) > 0 && !slices.Contains(q.Options, pl.Choice) {
			return nil, invalidf("choice %q is not one of the options of %s: %s.", pl.Choice, where, strings.Join(q.Options, ", "))
		}
		nq := *q
		nq.Answered, nq.Choice, nq.AnswerBy = true, pl.Choice, a.by.Seat
		if target != nil {
			target.Ask = &nq
		} else {
			it.Question = &nq
		}
		c.Answers, c.Choice = pl.Answers, pl.Choice
	}
	it.Thread = append(it.Thread, c)
	it.Version++
	it.UpdatedAt = a.at()
	a.history(it, "thread", fmt.Sprintf("comment %d posted (%d bytes)", id, len(pl.Body)))
	if err := a.putItem(old, it); err != nil {
		return nil, err
	}
	if pl.Turn != "" && pl.Choice == "" {
		if err := setJSON(a.b, kTurnNote+it.ID+"/"+pl.Turn, id); err != nil {
			return nil, err
		}
	}
	woken := slices.Clone(pl.Mentions)
	if pl.Ask != nil && !slices.Contains(woken, pl.Ask.To) {
		woken = append(woken, pl.Ask.To)
	}
	for _, m := range woken {
		if err := a.wake(m, it.Key, id); err != nil {
			return nil, err
		}
	}
	if err := a.activity("commented", it.Project, it.Key, fmt.Sprintf("comment %d on %s (%d bytes)", id, it.Key, len(pl.Body)), map[string]any{"comment": id, "body": pl.Body}); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, CommentID: id, Mentions: pl.Mentions}, nil
}

func applyMerge(a *applier) (any, error) {
	var pl mergePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	dupOld, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	surv, err := readItem(a.r, pl.Into)
	if err != nil {
		return nil, err
	}
	if surv == nil {
		return nil, invalidf("into names %s, which is no work item.", pl.Into)
	}
	if surv.Key == dupOld.Key {
		return nil, invalidf("into names %s itself; an item cannot be merged into itself.", surv.Key)
	}
	if dupOld.MergedInto != "" {
		return nil, invalidf("%s was already merged into %s.", dupOld.Key, dupOld.MergedInto)
	}
	if surv.MergedInto != "" {
		return nil, invalidf("into names %s, which was itself merged into %s; merge into %s.", surv.Key, surv.MergedInto, surv.MergedInto)
	}
	cat, err := readCatalogue(a.r)
	if err != nil {
		return nil, err
	}
	kids, err := a.children(dupOld.Key)
	if err != nil {
		return nil, err
	}
	var moved []string
	for _, k := range kids {
		if k == surv.Key {
			continue
		}
		kOld, err := a.mustItem(k)
		if err != nil {
			return nil, err
		}
		kNew := clone(kOld)
		kNew.Parent = surv.Key
		kNew.Version++
		kNew.UpdatedAt = a.at()
		a.history(kNew, "parent", dupOld.Key+" -> "+surv.Key+" (merge)")
		if err := a.putItem(kOld, kNew); err != nil {
			return nil, err
		}
		moved = append(moved, k)
	}
	dup := clone(dupOld)
	dup.MergedInto = surv.Key
	dup.Links = append(dup.Links, link{Kind: "duplicate_of", Key: surv.Key})
	if c := cat.cancelled(); c != "" && dup.Status != c {
		a.history(dup, "status", dup.Status+" -> "+c+" (merged)")
		dup.Status = c
	}
	a.history(dup, "merged", "into "+surv.Key)
	dup.Version++
	dup.UpdatedAt = a.at()
	if err := a.putItem(dupOld, dup); err != nil {
		return nil, err
	}
	// Re-read the survivor: re-parenting may not touch it, but a child that
	// is the survivor itself was skipped above, and the read keeps this
	// write on the newest row either way.
	survOld, err := a.mustItem(surv.Key)
	if err != nil {
		return nil, err
	}
	sv := clone(survOld)
	sv.Links = append(sv.Links, link{Kind: "duplicated_by", Key: dup.Key})
	a.history(sv, "merged", fmt.Sprintf("absorbed %s (%d subtasks re-parented)", dup.Key, len(moved)))
	sv.Version++
	sv.UpdatedAt = a.at()
	if err := a.putItem(survOld, sv); err != nil {
		return nil, err
	}
	if err := a.activity("merged", dup.Project, dup.Key, fmt.Sprintf("merged %s into %s", dup.Key, sv.Key), nil); err != nil {
		return nil, err
	}
	return itemResult{Key: sv.Key, ID: sv.ID, Version: sv.Version, Reparented: moved, Status: dup.Status}, nil
}

func applyMove(a *applier) (any, error) {
	var pl movePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	top, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	if top.Parent != "" {
		return nil, invalidf("%s is a subtask of %s; move %s, and its subtasks go with it.", top.Key, top.Parent, top.Parent)
	}
	if top.Project == pl.To.Key {
		return nil, invalidf("project: %s is already in %s.", top.Key, pl.To.Key)
	}
	dest, err := a.ensureProject(pl.To)
	if err != nil {
		return nil, err
	}
	// Collect the item and its subtasks, depth first, so parents are
	// re-keyed before the children that point at them.
	order := []*item{top}
	for i := 0; i < len(order); i++ {
		kids, err := a.children(order[i].Key)
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			c, err := a.mustItem(k)
			if err != nil {
				return nil, err
			}
			order = append(order, c)
		}
	}
	rekeyed := map[string]string{}
	for _, old := range order {
		dest, err = readProject(a.r, dest.Key)
		if err != nil {
			return nil, err
		}
		dest.Next++
		if err := a.putProject(dest); err != nil {
			return nil, err
		}
		nk := itemKey(dest.Key, dest.Next)
		rekeyed[old.Key] = nk
		it := clone(old)
		if err := a.unindex(old); err != nil {
			return nil, err
		}
		if err := a.b.Delete([]byte(kItem+old.Key), nil); err != nil {
			return nil, err
		}
		if err := a.b.Delete([]byte(kSummary+old.Key), nil); err != nil {
			return nil, err
		}
		if err := setJSON(a.b, kAlias+old.Key, nk); err != nil {
			return nil, err
		}
		it.OldKeys = append(it.OldKeys, old.Key)
		it.Key, it.Project, it.Number = nk, dest.Key, dest.Next
		if np, ok := rekeyed[it.Parent]; ok {
			it.Parent = np
		}
		it.Version++
		it.UpdatedAt = a.at()
		a.history(it, "moved", old.Key+" -> "+nk)
		if err := a.putItem(nil, it); err != nil {
			return nil, err
		}
	}
	// Links elsewhere keep naming the old keys; the aliases resolve them.
	if err := a.activity("moved", dest.Key, rekeyed[top.Key], fmt.Sprintf("moved %s and %d subtasks to %s", top.Key, len(order)-1, dest.Key), rekeyed); err != nil {
		return nil, err
	}
	moved, err := a.mustItem(rekeyed[top.Key])
	if err != nil {
		return nil, err
	}
	return itemResult{Key: moved.Key, ID: moved.ID, Version: moved.Version, Project: dest.Key, Rekeyed: rekeyed}, nil
}

func applyProject(a *applier) (any, error) {
	var pl projectPayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	if pl.Name != nil {
		p.Name = *pl.Name
	}
	if pl.DefaultAssignee != nil {
		p.DefaultAssignee = *pl.DefaultAssignee
	}
	if pl.Labels != nil {
		p.Labels = slices.Clone(*pl.Labels)
	}
	var added []string
	for _, l := range pl.AddLabels {
		if !slices.Contains(p.Labels, l) {
			p.Labels = append(p.Labels, l)
			added = append(added, l)
		}
	}
	slices.Sort(p.Labels)
	p.Version++
	if err := a.putProject(p); err != nil {
		return nil, err
	}
	if err := a.activity("project_written", p.Key, "", "wrote project "+p.Key, pl); err != nil {
		return nil, err
	}
	return projectResult{Key: p.Key, Version: p.Version, Labels: p.Labels, Added: added}, nil
}

func applyCatalogue(a *applier) (any, error) {
	var pl cataloguePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	cur, err := readCatalogue(a.r)
	if err != nil {
		return nil, err
	}
	// A status still carried by items cannot leave the catalogue: those
	// items would hold a status nothing defines.
	it, err := a.r.NewIter(&pebble.IterOptions{LowerBound: []byte(kProject), UpperBound: []byte("trk/proj0")})
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for it.First(); it.Valid(); it.Next() {
		var p project
		if err := json.Unmarshal(it.Value(), &p); err != nil {
			it.Close()
			return nil, err
		}
		for s, n := range p.Counts {
			if n > 0 {
				inUse[s] = true
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	for s := range inUse {
		if _, ok := pl.Catalogue.status(s); !ok {
			return nil, invalidf("statuses leaves out %q, which work items still carry; move them to another status first.", s)
		}
	}
	pl.Catalogue.Version = cur.Version + 1
	if err := setJSON(a.b, kCatalogue, pl.Catalogue); err != nil {
		return nil, err
	}
	if err := a.activity("catalogue_written", "", "", fmt.Sprintf("wrote the work catalogue (%d statuses, %d priorities)", len(pl.Catalogue.Statuses), len(pl.Catalogue.Priorities)), nil); err != nil {
		return nil, err
	}
	return map[string]int{"version": pl.Catalogue.Version}, nil
}

func applyFileWrite(a *applier) (any, error) {
	var pl fileWritePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	var f file
	found, err := getJSON(a.r, kFile+p.Key+"/"+pl.Path, &f)
	if err != nil {
		return nil, err
	}
	if pl.IfVersion != 0 && (!found || f.Version != pl.IfVersion) {
		return nil, authority.Refuse(authority.StaleVersion, "%s in %s is at version %d, not %d; read it again and decide from what it holds now.", pl.Path, p.Key, f.Version, pl.IfVersion).WithData("version", f.Version)
	}
	f.Project, f.Path, f.Type, f.Content = p.Key, pl.Path, pl.Type, pl.Content
	f.Version++
	f.Updated = a.at()
	if !slices.Contains(f.Writers, a.by) {
		f.Writers = append(f.Writers, a.by)
	}
	if err := setJSON(a.b, kFile+p.Key+"/"+pl.Path, f); err != nil {
		return nil, err
	}
	if err := a.activity("file_written", p.Key, "", fmt.Sprintf("wrote %s (%d bytes)", pl.Path, len(pl.Content)), nil); err != nil {
		return nil, err
	}
	return fileResult{Project: p.Key, Path: pl.Path, Version: f.Version, Size: len(f.Content)}, nil
}

func applyFileRemove(a *applier) (any, error) {
	var pl fileRemovePayload
	if err := a.payload(&pl); err != nil {
		return nil, err
	}
	ok, err := exists(a.r, kFile+pl.Project+"/"+pl.Path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, authority.Refuse(authority.NotFound, "Project %s has no file at %s.", pl.Project, pl.Path)
	}
	// The content goes with the row: nothing keeps a removed file's bytes.
	if err := a.b.Delete([]byte(kFile+pl.Project+"/"+pl.Path), nil); err != nil {
		return nil, err
	}
	if err := a.activity("file_removed", pl.Project, "", "removed "+pl.Path, nil); err != nil {
		return nil, err
	}
	return fileResult{Project: pl.Project, Path: pl.Path, Removed: true}, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
