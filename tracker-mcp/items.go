package tracker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// ---- create_work_item ----

type createIn struct {
	Project             string   `json:"project,omitempty" jsonschema:"project key, e.g. CORE; defaults to your own unit's project and is required when your unit owns none"`
	Title               string   `json:"title" jsonschema:"one line saying what the work is"`
	Description         string   `json:"description,omitempty" jsonschema:"the details: what, why, how to tell it is done"`
	Status              string   `json:"status,omitempty" jsonschema:"where it starts, a status of the work catalogue; default todo"`
	Assignee            string   `json:"assignee,omitempty" jsonschema:"handle of who should do it; left out, the project's default assignee gets it, else the lead gets it to triage"`
	Priority            string   `json:"priority,omitempty" jsonschema:"a priority of the work catalogue (none, low, medium, high, urgent by default)"`
	Labels              []string `json:"labels,omitempty" jsonschema:"labels the project has declared"`
	LabelsCreateMissing bool     `json:"labels_create_missing,omitempty" jsonschema:"declare any of labels the project lacks before filing"`
	Parent              string   `json:"parent,omitempty" jsonschema:"key of the item this is a subtask of"`
	Ask                 string   `json:"ask,omitempty" jsonschema:"file the item as this question to the assignee"`
	Decision            []string `json:"decision,omitempty" jsonschema:"with ask: the options the assignee chooses between"`
	OpID                string   `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type createOut struct {
	writeOut
	Key          string `json:"key,omitempty"`
	ID           string `json:"id,omitempty"`
	Version      int    `json:"version,omitempty"`
	Project      string `json:"project,omitempty"`
	Status       string `json:"status,omitempty"`
	Assignee     string `json:"assignee,omitempty"`
	AssignedBy   string `json:"assigned_by,omitempty"`
	AssigneeNote string `json:"assignee_note,omitempty"`
	Question     bool   `json:"question,omitempty"`
}

func (s *srv) createWorkItem(ctx context.Context, c authority.Caller, in createIn) (createOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "create_work_item", in, given, false)
	if err != nil {
		return createOut{}, err
	}
	if a, ok, err := s.recorded(oc); ok || err != nil {
		return s.createAnswer(oc, a, "", err)
	}
	if strings.TrimSpace(in.Title) == "" {
		return createOut{}, authority.Refuse(authority.Invalid, "title is empty; say in one line what the work is.")
	}
	var (
		decl projectDecl
		pl   createPayload
		next int
	)
	err = s.view(func(r pebble.Reader) error {
		d, p, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return err
		}
		decl = d
		if p != nil {
			next = p.Next
		}
		cat, err := readCatalogue(r)
		if err != nil {
			return err
		}
		pl = createPayload{common: oc.common, Project: decl, Title: in.Title, Description: unfence(in.Description),
			Status: in.Status, Priority: in.Priority, Labels: dedupe(in.Labels)}
		if pl.Status == "" {
			pl.Status = cat.firstOpen()
		} else if _, ok := cat.status(pl.Status); !ok {
			return authority.Refuse(authority.Invalid, "status %q is not in the work catalogue (%s).", pl.Status, strings.Join(cat.statusKeys(), ", "))
		}
		if pl.Priority != "" && !slices.Contains(cat.Priorities, pl.Priority) {
			return authority.Refuse(authority.Invalid, "priority %q is not in the work catalogue (%s).", pl.Priority, strings.Join(cat.Priorities, ", "))
		}
		if len(pl.Labels) > 0 && !in.LabelsCreateMissing {
			have := &project{Key: decl.Key}
			if p != nil {
				have = p
			}
			if err := checkLabels(have, pl.Labels); err != nil {
				return err
			}
		}
		if in.Parent != "" {
			parent, err := readItem(r, in.Parent)
			if err != nil {
				return err
			}
			if parent == nil {
				return authority.Refuse(authority.Invalid, "parent %s names no work item; file it without a parent or name an existing item.", in.Parent)
			}
			pl.Parent = parent.Key
		}
		switch {
		case in.Assignee != "":
			h, err := s.seatArg("assignee", in.Assignee)
			if err != nil {
				return err
			}
			pl.Assignee, pl.Via = h, "argument"
		case p != nil && p.DefaultAssignee != "":
			pl.Assignee, pl.Via = p.DefaultAssignee, "project_default"
		default:
			pl.Assignee, pl.Triage, pl.Via = s.lead(decl), true, "triage"
		}
		return nil
	})
	if err != nil {
		return createOut{}, err
	}
	if len(in.Decision) > 0 && in.Ask == "" {
		return createOut{}, authority.Refuse(authority.Invalid, "decision needs ask: the options belong to a question.")
	}
	if in.Ask != "" {
		if pl.Assignee == "" {
			return createOut{}, authority.Refuse(authority.Invalid, "ask needs somebody to put the question to: name an assignee (project %s has no default assignee and no lead).", decl.Key)
		}
		pl.Question = &question{To: pl.Assignee, Text: unfence(in.Ask), Options: dedupe(in.Decision)}
	}
	if in.LabelsCreateMissing && len(pl.Labels) > 0 {
		if err := s.declareLabels(ctx, oc, decl, pl.Labels, "the item was not filed"); err != nil {
			return createOut{}, err
		}
	}
	pl.Key = s.proposeKey(oc.id, decl.Key, next)
	a, err := s.write(ctx, oc, kindCreate, pl)
	return s.createAnswer(oc, a, pl.Key, err)
}

// proposeKey mints the key a create asks for. The repeat of an operation
// proposes what its first attempt did, so the key an unknown answer named is
// the one the repeat files under.
func (s *srv) proposeKey(id state.OpID, proj string, next int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.minted[id]; ok {
		return k
	}
	n := max(next, s.reserved[proj]) + 1
	s.reserved[proj] = n
	k := itemKey(proj, n)
	if len(s.minted) > 10000 {
		clear(s.minted)
	}
	s.minted[id] = k
	return k
}

func (s *srv) createAnswer(oc *opCall, a state.Answer, proposed string, err error) (createOut, error) {
	if errors.Is(err, errUnknown) {
		extra := ""
		r := s.unknownRefusal(oc, "the item", extra)
		if proposed != "" {
			r = s.unknownRefusal(oc, "the item", fmt.Sprintf("If it was filed, the key it has is %s; that is not a receipt. ", proposed)).WithData("key_if_filed", proposed)
		}
		return createOut{}, r
	}
	if err != nil {
		return createOut{}, err
	}
	out := createOut{writeOut: oc.out(a)}
	if a.Outcome == state.Pending {
		out.Key = proposed
		return out, nil
	}
	var res itemResult
	if err := json.Unmarshal(a.Result, &res); err != nil {
		return createOut{}, err
	}
	s.mu.Lock()
	delete(s.minted, oc.id)
	s.mu.Unlock()
	out.Key, out.ID, out.Version, out.Project, out.Status, out.Assignee = res.Key, res.ID, res.Version, res.Project, res.Status, res.Assignee
	out.AssignedBy, out.Question = res.Via, res.Question
	switch res.Via {
	case "argument":
		out.AssigneeNote = "Assigned to " + res.Assignee + ", as asked."
	case "project_default":
		out.AssigneeNote = "No assignee was named, so it went to " + res.Assignee + ", the project's default assignee."
	case "triage":
		if res.Assignee == "" {
			out.AssigneeNote = "No assignee was named and the project has neither a default assignee nor a lead: it waits unassigned in triage."
		} else {
			out.AssigneeNote = "No assignee was named and the project has no default assignee, so it went to triage for " + res.Assignee + ", the project's lead."
		}
	}
	return out, nil
}

// declareLabels writes the label declaration a call asked for before its own
// write (WR-7). If its outcome is unknown the call stops there, answered as
// the write it did not make.
func (s *srv) declareLabels(ctx context.Context, oc *opCall, decl projectDecl, labels []string, notMade string) error {
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return authority.Refuse(authority.Invalid, "labels holds %q; a label is lower-case letters, digits and _ . : -, up to 48 characters.", l)
		}
	}
	sub := oc.sub("declare_labels", map[string]any{"project": decl.Key, "labels": labels})
	if _, ok, err := s.recorded(sub); ok || err != nil {
		return err
	}
	_, err := s.write(ctx, sub, kindProject, projectPayload{common: oc.common, Project: decl, AddLabels: labels})
	if !errors.Is(err, errUnknown) {
		return err
	}
	tool := oc.tool
	if _, vouched := s.d.Node.Vouches(sub.id); !vouched {
		return authority.Refuse(authority.Unavailable,
			"%s: this call declares its labels first, and this node cannot tell whether that declaration (operation %s) landed. Declare %s on %s with write_project first, which is harmless if they already landed, then make the same %s call, which will then make its own write once.",
			upperFirst(notMade), sub.id, strings.Join(labels, ", "), decl.Key, tool).
			WithData("outcome", string(state.Unknown)).WithData("op_id", string(oc.id))
	}
	r := s.unknownRefusal(oc, "the label declaration this call makes first", upperFirst(notMade)+": the call stopped before its own write. ")
	return r
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		x = strings.TrimSpace(x)
		if x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// ---- get_work_item ----

type getIn struct {
	Key string `json:"key" jsonschema:"the item's key (e.g. CORE-12; an old key from before a move works too) or its id (wi_...)"`
}

type commentOut struct {
	ID       int       `json:"id"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Body     string    `json:"body"`
	Mentions []string  `json:"mentions,omitempty"`
	Ask      *askOut   `json:"ask,omitempty"`
	Answers  int       `json:"answers,omitempty"`
	Choice   string    `json:"choice,omitempty"`
}

type askOut struct {
	To       string   `json:"to"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	Answered bool     `json:"answered"`
	Choice   string   `json:"choice,omitempty"`
	AnswerBy string   `json:"answer_by,omitempty"`
}

type itemOut struct {
	Key           string       `json:"key"`
	ID            string       `json:"id"`
	Project       string       `json:"project"`
	Title         string       `json:"title"`
	Description   string       `json:"description,omitempty"`
	Status        string       `json:"status"`
	Assignee      string       `json:"assignee,omitempty"`
	Triage        bool         `json:"triage,omitempty"`
	Priority      string       `json:"priority,omitempty"`
	Labels        []string     `json:"labels,omitempty"`
	Parent        string       `json:"parent,omitempty"`
	Subtasks      []string     `json:"subtasks,omitempty"`
	Links         []link       `json:"links,omitempty"`
	Checklist     []checkItem  `json:"checklist,omitempty"`
	Question      *askOut      `json:"question,omitempty"`
	Thread        []commentOut `json:"thread,omitempty"`
	History       []historyRow `json:"history,omitempty"`
	Reassignments int          `json:"reassignments"`
	OldKeys       []string     `json:"old_keys,omitempty"`
	MergedInto    string       `json:"merged_into,omitempty"`
	Version       int          `json:"version"`
	CreatedBy     string       `json:"created_by"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

type getOut struct {
	Provenance provenance `json:"provenance"`
	Item       itemOut    `json:"item"`
}

func (e *envelope) ask(q *question, by writer) *askOut {
	if q == nil {
		return nil
	}
	return &askOut{To: q.To, Question: e.fence(q.Text, []writer{by}), Options: q.Options, Answered: q.Answered, Choice: q.Choice, AnswerBy: q.AnswerBy}
}

func (s *srv) getWorkItem(_ context.Context, _ authority.Caller, in getIn) (getOut, error) {
	var out getOut
	err := s.view(func(r pebble.Reader) error {
		it, err := readItem(r, in.Key)
		if err != nil {
			return err
		}
		if it == nil {
			return authority.Refuse(authority.NotFound, "No work item has the key or id %q.", in.Key)
		}
		a := &applier{r: r}
		kids, err := a.children(it.Key)
		if err != nil {
			return err
		}
		var e envelope
		o := itemOut{Key: it.Key, ID: it.ID, Project: it.Project, Title: it.Title,
			Description: e.fence(it.Description, it.DescribedBy), Status: it.Status, Assignee: it.Assignee,
			Triage: it.Triage, Priority: it.Priority, Labels: it.Labels, Parent: it.Parent, Subtasks: kids,
			Links: it.Links, Checklist: it.Checklist, Question: e.ask(it.Question, it.CreatedBy), History: it.History,
			Reassignments: it.Reassignments, OldKeys: it.OldKeys, MergedInto: it.MergedInto, Version: it.Version,
			CreatedBy: it.CreatedBy.Seat, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
		for _, c := range it.Thread {
			o.Thread = append(o.Thread, commentOut{ID: c.ID, By: c.By.Seat, At: c.At, Body: e.fence(c.Body, []writer{c.By}),
				Mentions: c.Mentions, Ask: e.ask(c.Ask, c.By), Answers: c.Answers, Choice: c.Choice})
		}
		out = getOut{Provenance: e.provenance(), Item: o}
		return nil
	})
	return out, err
}

// ---- list_work_items ----

type listIn struct {
	Project  string `json:"project,omitempty" jsonschema:"only this project's items"`
	Status   string `json:"status,omitempty" jsonschema:"only items in this status"`
	Assignee string `json:"assignee,omitempty" jsonschema:"only items assigned to this handle; me means you"`
	Label    string `json:"label,omitempty" jsonschema:"only items carrying this label"`
	Priority string `json:"priority,omitempty" jsonschema:"only items of this priority"`
	Parent   string `json:"parent,omitempty" jsonschema:"only subtasks of this item"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 200; default 50"`
	Cursor   string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page"`
}

type listOut struct {
	Items      []summary `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

func (s *srv) listWorkItems(_ context.Context, c authority.Caller, in listIn) (listOut, error) {
	var out listOut
	err := s.view(func(r pebble.Reader) error {
		var err error
		out, err = s.list(r, c, in)
		return err
	})
	return out, err
}

func (s *srv) list(r pebble.Reader, c authority.Caller, in listIn) (listOut, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 200 {
		return listOut{}, authority.Refuse(authority.Invalid, "limit %d is outside 1 to 200.", in.Limit)
	}
	proj := strings.ToUpper(strings.TrimSpace(in.Project))
	assignee := strings.TrimSpace(in.Assignee)
	if strings.EqualFold(assignee, "me") {
		assignee = c.Seat
	} else if assignee != "" {
		h, err := s.seatArg("assignee", assignee)
		if err != nil {
			return listOut{}, err
		}
		assignee = h
	}
	parent := ""
	if in.Parent != "" {
		p, err := readItem(r, in.Parent)
		if err != nil {
			return listOut{}, err
		}
		if p == nil {
			return listOut{}, authority.Refuse(authority.Invalid, "parent %s names no work item.", in.Parent)
		}
		parent = p.Key
	}
	// Walk the narrowest index the filters allow, newest first; the other
	// filters are checked on each summary the walk reads. Only a parent
	// filter alone, or a combination whose index is much wider than its
	// answer, reads many summaries to fill a page.
	var prefix string
	switch {
	case assignee != "" && proj != "":
		prefix = kIxAssign + assignee + "/" + proj + "/"
	case assignee != "":
		prefix = kIxAssign + assignee + "/"
	case in.Label != "" && proj != "":
		prefix = kIxLabel + in.Label + "/" + proj + "/"
	case in.Label != "":
		prefix = kIxLabel + in.Label + "/"
	case proj != "" && in.Status != "":
		prefix = kIxStatus + proj + "/" + in.Status + "/"
	case in.Priority != "" && proj != "":
		prefix = kIxPrio + in.Priority + "/" + proj + "/"
	case in.Priority != "":
		prefix = kIxPrio + in.Priority + "/"
	case proj != "":
		prefix = kIxProject + proj + "/"
	case in.Status != "":
		prefix = kIxStatAll + in.Status + "/"
	default:
		prefix = kIxProject
	}
	upper := []byte(prefix + "\xff")
	if in.Cursor != "" {
		cur, err := base64.RawURLEncoding.DecodeString(in.Cursor)
		if err != nil || !strings.HasPrefix(string(cur), prefix) {
			return listOut{}, authority.Refuse(authority.Invalid, "cursor is not a next_cursor this list answered with these filters.")
		}
		upper = cur
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return listOut{}, err
	}
	defer it.Close()
	out := listOut{Items: []summary{}}
	var lastKey string
	for ok := it.Last(); ok; ok = it.Prev() {
		parts := strings.Split(strings.TrimPrefix(string(it.Key()), prefix), "/")
		// Every index key ends in the padded number; the project is in the
		// key only where the prefix does not already fix it.
		num, pk := parts[len(parts)-1], proj
		if len(parts) >= 2 {
			pk = parts[len(parts)-2]
		}
		var n int
		if _, err := fmt.Sscanf(num, "%d", &n); err != nil {
			continue
		}
		var sm summary
		found, err := getJSON(r, kSummary+itemKey(pk, n), &sm)
		if err != nil {
			return listOut{}, err
		}
		if !found ||
			(in.Status != "" && sm.Status != in.Status) ||
			(proj != "" && sm.Project != proj) ||
			(in.Label != "" && !slices.Contains(sm.Labels, in.Label)) ||
			(in.Priority != "" && sm.Priority != in.Priority) ||
			(parent != "" && sm.Parent != parent) {
			continue
		}
		if len(out.Items) == limit {
			// The cursor is an exclusive upper bound: the next page starts
			// below the last item answered, so hand back that one's key.
			out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(lastKey))
			break
		}
		out.Items = append(out.Items, sm)
		lastKey = string(it.Key())
	}
	return out, nil
}
