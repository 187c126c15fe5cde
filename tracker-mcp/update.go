package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// ---- update_work_item ----

type linkArg struct {
	Kind string `json:"kind" jsonschema:"waiting_on, blocks, duplicate_of or relates_to"`
	Key  string `json:"key" jsonschema:"the other item's key"`
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
	OpID                string       `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type updateOut struct {
	writeOut
	Key      string   `json:"key,omitempty"`
	Version  int      `json:"version,omitempty"`
	Changed  []string `json:"changed,omitempty"`
	Links    int      `json:"links_changed,omitempty"`
	Status   string   `json:"status,omitempty"`
	Assignee string   `json:"assignee,omitempty"`
}

func (s *srv) updateWorkItem(ctx context.Context, c authority.Caller, in updateIn) (updateOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "update_work_item", in, given, false)
	if err != nil {
		return updateOut{}, err
	}
	pl := updatePayload{common: oc.common, Key: in.Key, IfMatch: in.IfMatch, Title: in.Title, Status: in.Status,
		Reason: unfence(in.Reason), Priority: in.Priority, Parent: in.Parent, Checklist: in.Checklist}
	if in.Description != nil {
		d := unfence(*in.Description)
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
			deps = append(deps, linkPayload{common: oc.common, Kind: l.Kind, Target: strings.ToUpper(strings.TrimSpace(l.Key)), Remove: i == 1})
		}
	}
	if in.Checklist != nil {
		n := 0
		for _, set := range []bool{in.Checklist.Add != "", in.Checklist.Check != 0, in.Checklist.Uncheck != 0, in.Checklist.Remove != 0} {
			if set {
				n++
			}
		}
		if n != 1 {
			return updateOut{}, authority.Refuse(authority.Invalid, "checklist takes exactly one change (add, check, uncheck or remove) per call.")
		}
	}
	main, landed, err := s.recorded(oc)
	if err != nil {
		return updateOut{}, err
	}
	var decl projectDecl
	// Checked before the first write, so a call that names something
	// missing writes nothing at all.
	err = s.view(func(r pebble.Reader) error {
		it, err := readItem(r, in.Key)
		if err != nil {
			return err
		}
		if it == nil {
			return authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		pl.Key = it.Key
		decl, _, err = s.resolveProject(r, c, it.Project)
		if err != nil {
			return err
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
		if landed {
			return nil
		}
		if in.IfMatch != 0 && in.IfMatch != it.Version {
			return authority.Refuse(authority.StaleVersion, "%s is at version %d, not %d: it changed after you read it. Read it again and decide from what it says now.", it.Key, it.Version, in.IfMatch).WithData("version", it.Version)
		}
		cat, err := readCatalogue(r)
		if err != nil {
			return err
		}
		if in.Status != nil {
			if _, ok := cat.status(*in.Status); !ok {
				return authority.Refuse(authority.Invalid, "status %q is not in the work catalogue (%s).", *in.Status, strings.Join(cat.statusKeys(), ", "))
			}
		}
		if in.Priority != nil && !slices.Contains(cat.Priorities, *in.Priority) {
			return authority.Refuse(authority.Invalid, "priority %q is not in the work catalogue (%s).", *in.Priority, strings.Join(cat.Priorities, ", "))
		}
		if in.Assignee != nil && *in.Assignee != "" {
			h, err := s.seatArg("assignee", *in.Assignee)
			if err != nil {
				return err
			}
			pl.Assignee = &h
		} else if in.Assignee != nil {
			pl.Assignee = in.Assignee
		}
		if pl.Assignee != nil && *pl.Assignee != it.Assignee && it.Reassignments >= ReassignmentBudget {
			return authority.Refuse(authority.ReassignmentBudget, "%s has been reassigned %d times, its whole budget; do not reassign it again. Work it, or say in its thread what is blocking it.", it.Key, it.Reassignments)
		}
		if in.Parent != nil && *in.Parent != "" {
			p, err := readItem(r, *in.Parent)
			if err != nil {
				return err
			}
			if p == nil {
				return authority.Refuse(authority.Invalid, "parent %s names no work item.", *in.Parent)
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
	})
	if err != nil {
		return updateOut{}, err
	}
	if !landed {
		if in.LabelsCreateMissing && pl.Labels != nil && len(*pl.Labels) > 0 {
			if err := s.declareLabels(ctx, oc, decl, *pl.Labels, "the change was not made"); err != nil {
				return updateOut{}, err
			}
		}
		main, err = s.write(ctx, oc, kindUpdate, pl)
		if errors.Is(err, errUnknown) {
			extra := ""
			if len(deps) > 0 {
				extra = fmt.Sprintf("None of the %d link changes it also asked for were written. ", len(deps))
			}
			return updateOut{}, s.unknownRefusal(oc, "the change to "+pl.Key, extra)
		}
		if err != nil {
			return updateOut{}, err
		}
	}
	out := updateOut{writeOut: oc.out(main), Key: pl.Key}
	if main.Outcome == state.Applied {
		var res itemResult
		if err := json.Unmarshal(main.Result, &res); err != nil {
			return updateOut{}, err
		}
		out.Changed = res.Changed
	}
	// The dependency changes come after the item's own, each its own
	// operation derived from this call's, so a repeat writes exactly the
	// ones still missing.
	last := main
	for i, d := range deps {
		sub := oc.sub(fmt.Sprintf("link.%d", i), d)
		a, ok, err := s.recorded(sub)
		if !ok && err == nil {
			a, err = s.write(ctx, sub, kindLink, d)
		}
		if errors.Is(err, errUnknown) {
			return updateOut{}, s.unknownRefusal(oc, fmt.Sprintf("link change %d of %d (%s %s)", i+1, len(deps), d.Kind, d.Target),
				fmt.Sprintf("The change to %s itself landed, and the link changes before this one. ", pl.Key))
		}
		if err != nil {
			r := authority.AsRefusal(err)
			return updateOut{}, authority.Refuse(r.Class, "The change to %s landed, but link change %d of %d was refused: %s", pl.Key, i+1, len(deps), r.Sentence)
		}
		out.Links++
		if a.Outcome == state.Pending || last.Outcome == state.Pending {
			last.Outcome = state.Pending
		}
		last.Position = max(last.Position, a.Position)
	}
	out.writeOut = oc.out(last)
	// The version to send back as if_match is the item's newest, read after
	// every write the call made (WR-8).
	if last.Outcome == state.Applied {
		err = s.view(func(r pebble.Reader) error {
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

// ---- comment_on_work_item ----

type commentIn struct {
	Key      string   `json:"key" jsonschema:"the item's key"`
	Body     string   `json:"body" jsonschema:"the remark; @handle mentions wake the seats they name"`
	Ask      string   `json:"ask,omitempty" jsonschema:"handle of somebody this comment puts a question to"`
	Decision []string `json:"decision,omitempty" jsonschema:"with ask: the options to choose between"`
	Answers  int      `json:"answers,omitempty" jsonschema:"with choice: id of the comment whose question this answers; 0 answers the item's own question"`
	Choice   string   `json:"choice,omitempty" jsonschema:"the option chosen, answering a question"`
	OpID     string   `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type commentAnswer struct {
	writeOut
	Key           string   `json:"key,omitempty"`
	CommentID     int      `json:"comment_id,omitempty"`
	Version       int      `json:"version,omitempty"`
	Mentions      []string `json:"mentions,omitempty"`
	AlreadyPosted bool     `json:"already_posted,omitempty"`
}

func (s *srv) commentOnWorkItem(ctx context.Context, c authority.Caller, in commentIn) (commentAnswer, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "comment_on_work_item", in, given, false)
	if err != nil {
		return commentAnswer{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		body := unfence(in.Body)
		if strings.TrimSpace(body) == "" && in.Choice == "" {
			return commentAnswer{}, authority.Refuse(authority.Invalid, "body is empty; say something, or answer a question with choice.")
		}
		pl := commentPayload{common: oc.common, Body: body, Mentions: s.mentions(body), Answers: in.Answers, Choice: in.Choice}
		if len(in.Decision) > 0 && in.Ask == "" {
			return commentAnswer{}, authority.Refuse(authority.Invalid, "decision needs ask: the options belong to a question put to somebody.")
		}
		if in.Ask != "" {
			h, err := s.seatArg("ask", in.Ask)
			if err != nil {
				return commentAnswer{}, err
			}
			pl.Ask = &question{To: h, Text: body, Options: dedupe(in.Decision)}
		}
		err = s.view(func(r pebble.Reader) error {
			it, err := readItem(r, in.Key)
			if err != nil {
				return err
			}
			if it == nil {
				return authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
			}
			pl.Key = it.Key
			return nil
		})
		if err != nil {
			return commentAnswer{}, err
		}
		a, err = s.write(ctx, oc, kindComment, pl)
	}
	if errors.Is(err, errUnknown) {
		// Nothing about the remark is reported: not its id, not whom it
		// mentions, not its question.
		return commentAnswer{}, s.unknownRefusal(oc, "the comment on "+strings.ToUpper(in.Key), "")
	}
	if err != nil {
		return commentAnswer{}, err
	}
	out := commentAnswer{writeOut: oc.out(a), Key: strings.ToUpper(in.Key)}
	if a.Outcome == state.Applied {
		var res itemResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return commentAnswer{}, err
		}
		out.Key, out.CommentID, out.Version, out.Mentions, out.AlreadyPosted = res.Key, res.CommentID, res.Version, res.Mentions, res.AlreadyPosted
		if res.AlreadyPosted {
			out.Note = "This turn already posted a comment on this item; it is answered here instead of posting a second."
		}
	}
	return out, nil
}
