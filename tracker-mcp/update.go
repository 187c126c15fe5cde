package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- update_work_item ----

type linkArg struct {
	Kind string `json:"kind" jsonschema:"waiting_on, blocks, duplicate_of or relates_to"`
	Key  string `json:"key" jsonschema:"the other item's key"`
}

type checkChange struct {
	Add     string `json:"add,omitempty" jsonschema:"text of a new checklist entry"`
	Check   int    `json:"check,omitempty" jsonschema:"id of an entry to mark done"`
	Uncheck int    `json:"uncheck,omitempty" jsonschema:"id of an entry to mark not done"`
	Remove  int    `json:"remove,omitempty" jsonschema:"id of an entry to remove"`
}

type updateIn struct {
	Key                 string       `json:"key" jsonschema:"the item's key"`
	IfMatch             int          `json:"if_match,omitempty" jsonschema:"the version you read; the update is refused if the item changed since"`
	Title               *string      `json:"title,omitempty" jsonschema:"a new title"`
	Description         *string      `json:"description,omitempty" jsonschema:"a new description, replacing the old one whole"`
	Status              *string      `json:"status,omitempty" jsonschema:"a status of the work catalogue"`
	Assignee            *string      `json:"assignee,omitempty" jsonschema:"handle of the new assignee; empty unassigns"`
	Reason              string       `json:"reason,omitempty" jsonschema:"with assignee: why, for the new assignee to read"`
	Priority            *string      `json:"priority,omitempty" jsonschema:"a priority of the work catalogue"`
	Labels              *[]string    `json:"labels,omitempty" jsonschema:"the item's whole new set of labels"`
	LabelsCreateMissing bool         `json:"labels_create_missing,omitempty" jsonschema:"declare any of labels the project lacks before changing the item"`
	Parent              *string      `json:"parent,omitempty" jsonschema:"key of the new parent; empty makes it top-level"`
	Checklist           *checkChange `json:"checklist,omitempty" jsonschema:"one checklist change: add, check, uncheck or remove"`
	AddLinks            []linkArg    `json:"add_links,omitempty" jsonschema:"dependency links to add, written after the item's own change"`
	RemoveLinks         []linkArg    `json:"remove_links,omitempty" jsonschema:"dependency links to remove, written after the item's own change"`
	servers.OpIDArg
}

type updateOut struct {
	servers.WriteOut
	Key      string   `json:"key,omitempty"`
	Version  int      `json:"version,omitempty"`
	Changed  []string `json:"changed,omitempty"`
	Links    int      `json:"links_changed,omitempty"`
	Status   string   `json:"status,omitempty"`
	Assignee string   `json:"assignee,omitempty"`
}

type updatePayload struct {
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
	// Mentions are the seats a new description names that the old one did
	// not: they are woken (TRK-4).
	Mentions []string `json:"mentions,omitempty"`
}

type linkPayload struct {
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Remove bool   `json:"remove,omitempty"`
}

// inverse is the link the other item carries.
var inverse = map[string]string{
	"waiting_on": "blocks", "blocks": "waiting_on",
	"duplicate_of": "duplicated_by", "duplicated_by": "duplicate_of",
	"relates_to": "relates_to",
}

func (s *srv) updateWorkItem(ctx context.Context, c authority.Caller, in updateIn) (updateOut, error) {
	call, err := s.w.Begin(c, "update_work_item", &in, false)
	if err != nil {
		return updateOut{}, err
	}
	pl := updatePayload{Key: in.Key, IfMatch: in.IfMatch, Title: in.Title, Status: in.Status,
		Reason: servers.Unfence(in.Reason), Priority: in.Priority, Parent: in.Parent, Checklist: in.Checklist}
	if in.Description != nil {
		d := servers.Unfence(*in.Description)
		pl.Description = &d
	}
	if in.Labels != nil {
		l := dedupe(*in.Labels)
		if l == nil {
			l = []string{}
		}
		pl.Labels = &l
	}
	var deps []linkPayload
	for i, ls := range [][]linkArg{in.AddLinks, in.RemoveLinks} {
		for _, l := range ls {
			if _, ok := inverse[l.Kind]; !ok {
				return updateOut{}, authority.Refuse(authority.Invalid, "a link's kind %q is not waiting_on, blocks, duplicate_of or relates_to.", l.Kind)
			}
			deps = append(deps, linkPayload{Kind: l.Kind, Target: strings.ToUpper(strings.TrimSpace(l.Key)), Remove: i == 1})
		}
	}
	if err := checkOneChecklistChange(in.Checklist); err != nil {
		return updateOut{}, err
	}
	// What the call names is checked before its first write, landed or
	// not, so a call that names something missing writes nothing at all.
	err = s.w.View(func(r pebble.Reader) error {
		it, err := readItem(r, in.Key)
		if err != nil {
			return err
		}
		if it == nil {
			return authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		pl.Key = it.Key
		if pl.Description != nil {
			old := s.mentions(it.Description)
			for _, m := range s.mentions(*pl.Description) {
				if !slices.Contains(old, m) {
					pl.Mentions = append(pl.Mentions, m)
				}
			}
		}
		for i := range deps {
			t, err := readItem(r, deps[i].Target)
			if err != nil {
				return err
			}
			if t == nil {
				return authority.Refuse(authority.Invalid, "a link names %s, which is no work item; nothing was changed.", deps[i].Target)
			}
			deps[i].Key, deps[i].Target = it.Key, t.Key
		}
		return nil
	})
	if err != nil {
		return updateOut{}, err
	}
	ifUnknown := ""
	if len(deps) > 0 {
		ifUnknown = fmt.Sprintf("None of the %d link changes it also asked for were written. ", len(deps))
	}
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		if err := s.decideUpdate(r, c, in, &pl); err != nil {
			return servers.Intent{}, err
		}
		var first []servers.Step
		if in.LabelsCreateMissing && pl.Labels != nil && len(*pl.Labels) > 0 {
			it, err := readItem(r, pl.Key)
			if err != nil {
				return servers.Intent{}, err
			}
			decl, _, err := s.resolveProject(r, c, it.Project)
			if err != nil {
				return servers.Intent{}, err
			}
			step, err := declareLabels(decl, *pl.Labels, "update_work_item", "The change was not made")
			if err != nil {
				return servers.Intent{}, err
			}
			first = append(first, step)
		}
		return servers.Intent{Kind: kindUpdate, Payload: pl, What: "the change to " + pl.Key, IfUnknown: ifUnknown, First: first}, nil
	})
	if err != nil {
		return updateOut{}, err
	}
	out := updateOut{WriteOut: wo, Key: pl.Key}
	if res != nil {
		out.Changed = res.Changed
	}
	// The dependency changes come after the item's own (WR-8), each its own
	// operation derived from this call's, so a repeat writes exactly the
	// ones still missing.
	last := wo
	for i, d := range deps {
		dwo, _, err := servers.Write[itemResult](ctx, s.w, call.Sub(fmt.Sprintf("link.%d", i), d), func(pebble.Reader) (servers.Intent, error) {
			return servers.Intent{Kind: kindLink, Payload: d, What: fmt.Sprintf("link change %d of %d (%s %s)", i+1, len(deps), d.Kind, d.Target),
				IfUnknown: fmt.Sprintf("The change to %s itself landed, and the link changes before this one. ", pl.Key)}, nil
		})
		if r := (*authority.Refusal)(nil); errors.As(err, &r) && r.Data["outcome"] != string(state.Unknown) {
			return updateOut{}, authority.Refuse(r.Class, "The change to %s landed, but link change %d of %d was refused: %s", pl.Key, i+1, len(deps), r.Sentence)
		}
		if err != nil {
			return updateOut{}, err
		}
		out.Links++
		if dwo.Outcome == state.Pending {
			last.Outcome, last.Note = state.Pending, dwo.Note
		}
		last.Position = max(last.Position, dwo.Position)
	}
	out.WriteOut = last
	// The version to send back as if_match is the item's newest, read after
	// every write the call made (WR-8).
	if last.Outcome == state.Applied {
		err = s.w.View(func(r pebble.Reader) error {
			it, err := readItem(r, pl.Key)
			if err != nil || it == nil {
				return err
			}
			out.Key, out.Version, out.Status, out.Assignee = it.Key, it.Version, it.Status, it.Assignee
			return nil
		})
		if err != nil {
			return updateOut{}, err
		}
	}
	return out, nil
}

// decideUpdate checks an update against the item as r shows it, and
// settles the payload's assignee to the handle as the directory spells it.
func (s *srv) decideUpdate(r pebble.Reader, c authority.Caller, in updateIn, pl *updatePayload) error {
	it, err := readItem(r, pl.Key)
	if err != nil {
		return err
	}
	if it == nil {
		return authority.Refuse(authority.NotFound, "No work item has the key %s.", pl.Key)
	}
	if _, _, err := s.resolveProject(r, c, it.Project); err != nil {
		return err
	}
	if err := checkEditable(it, in.IfMatch); err != nil {
		return err
	}
	if err := pl.check(it); err != nil {
		return err
	}
	cat, err := readCatalogue(r)
	if err != nil {
		return err
	}
	if in.Status != nil {
		if err := cat.checkStatus(*in.Status); err != nil {
			return err
		}
	}
	if in.Priority != nil {
		if err := cat.checkPriority(*in.Priority); err != nil {
			return err
		}
	}
	if in.Assignee != nil && *in.Assignee != "" {
		h, err := s.seatArg("assignee", *in.Assignee)
		if err != nil {
			return err
		}
		pl.Assignee = &h
	}
	if pl.Assignee != nil {
		if err := checkReassign(it, *pl.Assignee); err != nil {
			return err
		}
	}
	if in.Parent != nil && *in.Parent != "" {
		if _, err := checkParent(r, it, *in.Parent); err != nil {
			return err
		}
	}
	if pl.Labels != nil && !in.LabelsCreateMissing {
		p, err := readProject(r, it.Project)
		if err != nil {
			return err
		}
		if p == nil {
			p = &project{Key: it.Project}
		}
		return checkLabels(p, *pl.Labels)
	}
	return nil
}

// check refuses an update of it past the board's bounds; the tool and the
// projector both ask it.
func (pl updatePayload) check(it *item) error {
	if pl.Title != nil {
		if err := checkTitle(*pl.Title); err != nil {
			return err
		}
	}
	adding, dropping := len(pl.Reason), 0
	if pl.Description != nil {
		if err := checkSize("description", *pl.Description, maxDescription); err != nil {
			return err
		}
		adding, dropping = adding+len(*pl.Description), len(it.Description)
	}
	if err := checkSize("reason", pl.Reason, maxShortText); err != nil {
		return err
	}
	if pl.Labels != nil {
		if err := checkItemLabels(*pl.Labels); err != nil {
			return err
		}
	}
	if c := pl.Checklist; c != nil && c.Add != "" {
		if err := checkSize("checklist.add", c.Add, maxShortText); err != nil {
			return err
		}
		if len(it.Checklist) >= maxChecklist {
			return authority.Refuse(authority.Invalid, "%s's checklist already has %d entries, its most; remove some or split the work.", it.Key, len(it.Checklist))
		}
		adding += len(c.Add)
	}
	return checkRoom(it, adding, dropping)
}

// checkOneChecklistChange refuses a checklist argument that asks for none
// or several changes.
func checkOneChecklistChange(c *checkChange) error {
	if c == nil {
		return nil
	}
	n := 0
	for _, set := range []bool{c.Add != "", c.Check != 0, c.Uncheck != 0, c.Remove != 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return authority.Refuse(authority.Invalid, "checklist takes exactly one change (add, check, uncheck or remove) per call.")
	}
	return nil
}

func applyUpdate(a *applier) (any, error) {
	var pl updatePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	if err := checkEditable(old, pl.IfMatch); err != nil {
		return nil, err
	}
	if err := pl.check(old); err != nil {
		return nil, err
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
		if !slices.Contains(it.TitledBy, a.By) {
			it.TitledBy = append(it.TitledBy, a.By)
		}
	}
	if pl.Description != nil && *pl.Description != it.Description {
		mark("description", describeText(it.Description, *pl.Description))
		it.Description = *pl.Description
		if !slices.Contains(it.DescribedBy, a.By) {
			it.DescribedBy = append(it.DescribedBy, a.By)
		}
		if err := a.wakeOnce(it, pl.Mentions, func(string) string { return "mentioned" }); err != nil {
			return nil, err
		}
	}
	cat, err := readCatalogue(a.R)
	if err != nil {
		return nil, err
	}
	if pl.Status != nil && *pl.Status != it.Status {
		if err := cat.checkStatus(*pl.Status); err != nil {
			return nil, err
		}
		mark("status", it.Status+" -> "+*pl.Status)
		it.Status = *pl.Status
	}
	if pl.Assignee != nil && *pl.Assignee != it.Assignee {
		if err := checkReassign(it, *pl.Assignee); err != nil {
			return nil, err
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
			it.Thread = append(it.Thread, comment{ID: len(it.Thread) + 1, By: a.By, At: a.At(), Body: pl.Reason, Mentions: nonEmpty(it.Assignee)})
		}
		if it.Assignee != "" {
			if err := a.wake(it.Assignee, it, 0, "assigned"); err != nil {
				return nil, err
			}
		}
	}
	if pl.Priority != nil && *pl.Priority != it.Priority {
		if err := cat.checkPriority(*pl.Priority); err != nil {
			return nil, err
		}
		mark("priority", orNone(it.Priority)+" -> "+*pl.Priority)
		it.Priority = *pl.Priority
	}
	if pl.Labels != nil && describeSet(it.Labels, *pl.Labels) != "" {
		p, err := readProject(a.R, it.Project)
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
		parent := ""
		if *pl.Parent != "" {
			if parent, err = checkParent(a.R, it, *pl.Parent); err != nil {
				return nil, err
			}
		}
		mark("parent", orNone(it.Parent)+" -> "+orNone(parent))
		it.Parent = parent
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
	it.UpdatedAt = a.At()
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
		return 0, authority.Refuse(authority.Invalid, "checklist names entry %d, which %s does not have.", id, it.Key)
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

func applyLink(a *applier) (any, error) {
	var pl linkPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	from, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	to, err := readItem(a.R, pl.Target)
	if err != nil {
		return nil, err
	}
	if to == nil {
		return nil, authority.Refuse(authority.Invalid, "links names %s, which is no work item.", pl.Target)
	}
	if to.Key == from.Key {
		return nil, authority.Refuse(authority.Invalid, "links names %s itself; an item cannot wait on or duplicate itself.", from.Key)
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
		it.UpdatedAt = a.At()
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
