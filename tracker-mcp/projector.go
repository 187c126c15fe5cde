package tracker

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
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
	kindView      = "tracker.view.write"
	kindInboxRead = "tracker.inbox.read"
	kindPin       = "tracker.pin.write"
	kindQueue     = "tracker.queue.write"
	kindBoard     = "tracker.item.board"
)

// Projectors returns the tracker's projectors; the hub registers them when
// it opens the state node.
func Projectors() []state.Projector {
	return []state.Projector{
		applying(kindCreate, applyCreate),
		applying(kindUpdate, applyUpdate),
		applying(kindLink, applyLink),
		applying(kindComment, applyComment),
		applying(kindMerge, applyMerge),
		applying(kindMove, applyMove),
		applying(kindProject, applyProject),
		applying(kindCatalogue, applyCatalogue),
		applying(kindFileWrite, applyFileWrite),
		applying(kindFileRm, applyFileRemove),
		applying(kindTurnEnded, applyTurnEnded),
		applying(kindView, applyView),
		applying(kindInboxRead, applyInboxRead),
		applying(kindPin, applyPin),
		applying(kindQueue, applyQueue),
		applying(kindBoard, applyBoard),
	}
}

// applier is one tracker operation being applied.
type applier struct{ *servers.Apply }

// applying adapts a tracker apply function to the kit's projector.
func applying(kind string, apply func(*applier) (any, error)) state.Projector {
	return servers.Projector(kind, func(a *servers.Apply) (any, error) { return apply(&applier{a}) })
}

// ensureProject returns the project row, creating it from decl when this is
// the first write that needs it.
func (a *applier) ensureProject(decl projectDecl) (*project, error) {
	p, err := readProject(a.R, decl.Key)
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
	p = &project{Key: decl.Key, Name: name, Unit: decl.Unit, Lead: decl.Lead, Version: 1, CreatedAt: a.At()}
	return p, a.putProject(p)
}

func (a *applier) putProject(p *project) error { return state.SetJSON(a.B, kProject+p.Key, p) }

// putItem writes an item and keeps its summary and indexes in step with it,
// and marks it for the search index when its searchable text changed. old
// is the item as it was (nil for a new one).
func (a *applier) putItem(old, it *item) error {
	if old != nil {
		if err := a.unindex(old); err != nil {
			return err
		}
	}
	if err := state.SetJSON(a.B, kItem+it.Key, it); err != nil {
		return err
	}
	sum, err := state.EncodeJSON(it.summary())
	if err != nil {
		return err
	}
	if err := a.B.Set([]byte(kSummary+it.Key), sum, nil); err != nil {
		return err
	}
	// A list index row carries the summary too, so a list reads its page
	// off the index it walks instead of reading each summary's own row.
	for _, k := range it.indexKeys() {
		var v []byte
		if !strings.HasPrefix(k, kIxChild) {
			v = sum
		}
		if err := a.B.Set([]byte(k), v, nil); err != nil {
			return err
		}
	}
	if err := state.SetJSON(a.B, kID+it.ID, it.Key); err != nil {
		return err
	}
	if err := a.count(it.Project, it.Status, +1); err != nil {
		return err
	}
	return a.touchSearch(old, it)
}

func (a *applier) unindex(old *item) error {
	for _, k := range old.indexKeys() {
		if err := a.B.Delete([]byte(k), nil); err != nil {
			return err
		}
	}
	return a.count(old.Project, old.Status, -1)
}

func (a *applier) count(proj, status string, delta int) error {
	p, err := readProject(a.R, proj)
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

// children are the keys of an item's subtasks.
func children(r pebble.Reader, key string) ([]string, error) {
	prefix := kIxChild + key + "/"
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return nil, err
	}
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, strings.TrimPrefix(string(it.Key()), prefix))
	}
	return out, it.Close()
}

func (a *applier) history(it *item, field, change string) {
	it.History = append(it.History, historyRow{At: a.At(), By: a.By.Seat, OperatorID: a.Op.Caller.OperatorID, Field: field, Change: change})
}

// activity adds a row to the feed; detail is the change record, texts
// included, which get_activity answers fenced as the actor's.
func (a *applier) activity(action, proj, key, sum string, detail any) error {
	return a.writeActivity(activity{Action: action, Project: proj, Item: key, Summary: sum}, detail)
}

// hubActivity is activity whose change record the hub wrote, not its
// actor: read back unfenced (WR-10 fences what somebody else wrote).
func (a *applier) hubActivity(action, proj, key, sum string, detail any) error {
	return a.writeActivity(activity{Action: action, Project: proj, Item: key, Summary: sum, ByHub: true}, detail)
}

func (a *applier) writeActivity(row activity, detail any) error {
	id := fmt.Sprintf("%016x.%04d", a.Pos, a.Seq())
	row.ID, row.At, row.Actor, row.OperatorID = "act_"+id, a.At(), a.By, a.Op.Caller.OperatorID
	if detail != nil {
		d, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		row.Detail = d
	}
	return state.SetJSON(a.B, kActivity+id, row)
}

// wake asks for seat to be woken about an item (TRK-4), and leaves the
// entry in its inbox (OPS-3); why is mentioned, asked or assigned.
func (a *applier) wake(seat string, it *item, commentID int, why string) error {
	if err := a.Wake(kWake, seat, it.Key, commentID); err != nil {
		return err
	}
	return a.deliver(seat, it, why, commentID)
}

// wakeOnce wakes each seat once about an item, in order, leaving out the
// writer: nobody is woken by their own write. why says what put the item
// in front of each (asked, assigned, mentioned), for their inbox.
func (a *applier) wakeOnce(it *item, seats []string, why func(seat string) string) error {
	seen := map[string]bool{a.By.Seat: true}
	for _, s := range seats {
		if seen[s] {
			continue
		}
		seen[s] = true
		if err := a.wake(s, it, 0, why(s)); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) mustItem(key string) (*item, error) {
	it, err := readItem(a.R, key)
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
	c.TitledBy = slices.Clone(it.TitledBy)
	c.OldKeys = slices.Clone(it.OldKeys)
	return &c
}

// describeSet says what joined and left a set, never both sides whole.
func describeSet(before, after []string) string {
	var parts []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			parts = append(parts, "+"+a)
		}
	}
	for _, b := range before {
		if !slices.Contains(after, b) {
			parts = append(parts, "-"+b)
		}
	}
	return strings.Join(parts, " ")
}

func describeText(before, after string) string {
	switch {
	case before == "":
		return fmt.Sprintf("set (%d bytes)", len(after))
	case after == "":
		return fmt.Sprintf("cleared (was %d bytes)", len(before))
	default:
		return fmt.Sprintf("rewritten (%d -> %d bytes)", len(before), len(after))
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
