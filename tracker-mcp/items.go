package tracker

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
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
	servers.OpIDArg
}

type createOut struct {
	servers.WriteOut
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

type createPayload struct {
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
	// Mentions are the seats the description names (@handle): they are
	// woken, as the assignee is (TRK-4).
	Mentions []string `json:"mentions,omitempty"`
}

func (s *srv) createWorkItem(ctx context.Context, c authority.Caller, in createIn) (createOut, error) {
	call, err := s.w.Begin(c, "create_work_item", &in, false)
	if err != nil {
		return createOut{}, err
	}
	var proposed string
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		pl, err := s.decideCreate(r, c, in)
		if err != nil {
			return servers.Intent{}, err
		}
		var first []servers.Step
		if in.LabelsCreateMissing && len(pl.Labels) > 0 {
			step, err := declareLabels(pl.Project, pl.Labels, "create_work_item", "The item was not filed")
			if err != nil {
				return servers.Intent{}, err
			}
			first = append(first, step)
		}
		p, err := readProject(r, pl.Project.Key)
		if err != nil {
			return servers.Intent{}, err
		}
		next := 0
		if p != nil {
			next = p.Next
		}
		pl.Key = s.proposeKey(call.ID, pl.Project.Key, next)
		proposed = pl.Key
		return servers.Intent{Kind: kindCreate, Payload: pl, What: "the item", First: first,
			IfUnknown:   fmt.Sprintf("If it was filed, the key it has is %s; that is not a receipt. ", pl.Key),
			UnknownData: map[string]any{"key_if_filed": pl.Key}}, nil
	})
	if err != nil {
		return createOut{}, err
	}
	out := createOut{WriteOut: wo}
	if wo.Outcome == state.Pending {
		out.Key = proposed
	}
	if res == nil {
		return out, nil
	}
	s.mu.Lock()
	delete(s.minted, call.ID)
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

// decideCreate checks a create against the board as r shows it and builds
// its payload, all but the key.
func (s *srv) decideCreate(r pebble.Reader, c authority.Caller, in createIn) (createPayload, error) {
	if len(in.Decision) > 0 && in.Ask == "" {
		return createPayload{}, authority.Refuse(authority.Invalid, "decision needs ask: the options belong to a question.")
	}
	if err := checkSize("ask", in.Ask, maxComment); err != nil {
		return createPayload{}, err
	}
	if err := checkOptions(in.Decision); err != nil {
		return createPayload{}, err
	}
	decl, p, err := s.resolveProject(r, c, in.Project)
	if err != nil {
		return createPayload{}, err
	}
	cat, err := readCatalogue(r)
	if err != nil {
		return createPayload{}, err
	}
	pl := createPayload{Project: decl, Title: in.Title, Description: servers.Unfence(in.Description),
		Status: in.Status, Priority: in.Priority, Labels: dedupe(in.Labels)}
	pl.Mentions = s.mentions(pl.Description)
	if err := pl.check(); err != nil {
		return createPayload{}, err
	}
	if pl.Status == "" {
		pl.Status = cat.firstOpen()
	} else if err := cat.checkStatus(pl.Status); err != nil {
		return createPayload{}, err
	}
	if err := cat.checkPriority(pl.Priority); err != nil {
		return createPayload{}, err
	}
	if len(pl.Labels) > 0 && !in.LabelsCreateMissing {
		have := &project{Key: decl.Key}
		if p != nil {
			have = p
		}
		if err := checkLabels(have, pl.Labels); err != nil {
			return createPayload{}, err
		}
	}
	if in.Parent != "" {
		if pl.Parent, err = checkParent(r, nil, in.Parent); err != nil {
			return createPayload{}, err
		}
	}
	switch {
	case in.Assignee != "":
		h, err := s.seatArg("assignee", in.Assignee)
		if err != nil {
			return createPayload{}, err
		}
		pl.Assignee, pl.Via = h, "argument"
	case p != nil && p.DefaultAssignee != "":
		pl.Assignee, pl.Via = p.DefaultAssignee, "project_default"
	default:
		pl.Assignee, pl.Triage, pl.Via = s.lead(decl), true, "triage"
	}
	if in.Ask != "" {
		if pl.Assignee == "" {
			return createPayload{}, authority.Refuse(authority.Invalid, "ask needs somebody to put the question to: name an assignee (project %s has no default assignee and no lead).", decl.Key)
		}
		pl.Question = &question{To: pl.Assignee, Text: servers.Unfence(in.Ask), Options: dedupe(in.Decision)}
	}
	return pl, nil
}

// check refuses a create whose text is past the board's bounds; the tool
// and the projector both ask it.
func (pl createPayload) check() error {
	if err := checkTitle(pl.Title); err != nil {
		return err
	}
	if err := checkSize("description", pl.Description, maxDescription); err != nil {
		return err
	}
	return checkItemLabels(pl.Labels)
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

func applyCreate(a *applier) (any, error) {
	var pl createPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	if err := pl.check(); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	cat, err := readCatalogue(a.R)
	if err != nil {
		return nil, err
	}
	if err := cat.checkStatus(pl.Status); err != nil {
		return nil, err
	}
	if err := cat.checkPriority(pl.Priority); err != nil {
		return nil, err
	}
	if err := checkLabels(p, pl.Labels); err != nil {
		return nil, err
	}
	if pl.Parent != "" {
		if pl.Parent, err = checkParent(a.R, nil, pl.Parent); err != nil {
			return nil, err
		}
	}
	// The tool proposed a key so a lost acknowledgement can still name it;
	// it is used unless another write took that number first.
	number := p.Next + 1
	if proj, n, ok := parseKey(pl.Key); ok && proj == p.Key && n > 0 {
		taken, err := state.Exists(a.R, kItem+pl.Key)
		if err != nil {
			return nil, err
		}
		aliased, err := state.Exists(a.R, kAlias+pl.Key)
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
		ID: fmt.Sprintf("wi_%x", a.Pos), Key: itemKey(p.Key, number), Project: p.Key, Number: number,
		Title: pl.Title, Description: pl.Description, Status: pl.Status, Assignee: pl.Assignee,
		Triage: pl.Triage, Priority: pl.Priority, Labels: pl.Labels, Parent: pl.Parent,
		Question: pl.Question, Version: 1, CreatedBy: a.By, CreatedAt: a.At(), UpdatedAt: a.At(),
	}
	it.TitledBy = []servers.Author{a.By}
	if pl.Description != "" {
		it.DescribedBy = []servers.Author{a.By}
	}
	a.history(it, "created", fmt.Sprintf("filed in %s as %s, assigned to %s", p.Key, it.Status, orNone(it.Assignee)))
	if err := a.putItem(nil, it); err != nil {
		return nil, err
	}
	// The seats the item is put in front of wake (TRK-4): whom it asks,
	// whom it is handed to, whom its description names; never its writer.
	var woken []string
	if it.Question != nil && it.Question.To != "" {
		woken = append(woken, it.Question.To)
	}
	woken = append(append(woken, nonEmpty(it.Assignee)...), pl.Mentions...)
	if err := a.wakeOnce(it, woken, func(seat string) string {
		switch {
		case it.Question != nil && seat == it.Question.To:
			return "asked"
		case seat == it.Assignee:
			return "assigned"
		}
		return "mentioned"
	}); err != nil {
		return nil, err
	}
	if err := a.activity("created", p.Key, it.Key, fmt.Sprintf("filed %s (title %d bytes, description %d bytes)", it.Key, len(it.Title), len(it.Description)),
		map[string]any{"title": it.Title, "description": it.Description, "assignee": it.Assignee, "status": it.Status}); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, Project: it.Project, Status: it.Status, Assignee: it.Assignee, Triage: it.Triage, Via: pl.Via, Question: it.Question != nil}, nil
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
	Key         string       `json:"key"`
	ID          string       `json:"id"`
	Project     string       `json:"project"`
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	Status      string       `json:"status"`
	Assignee    string       `json:"assignee,omitempty"`
	Triage      bool         `json:"triage,omitempty"`
	Priority    string       `json:"priority,omitempty"`
	Labels      []string     `json:"labels,omitempty"`
	Parent      string       `json:"parent,omitempty"`
	Subtasks    []string     `json:"subtasks,omitempty"`
	Links       []link       `json:"links,omitempty"`
	Checklist   []checkItem  `json:"checklist,omitempty"`
	Question    *askOut      `json:"question,omitempty"`
	Thread      []commentOut `json:"thread,omitempty"`
	History     []historyRow `json:"history,omitempty"`
	// HistoryOmitted counts the older history rows left out: the newest
	// historyShown are answered.
	HistoryOmitted int `json:"history_omitted,omitempty"`
	// LastFailedTurn is the newest seat's turn about the item that ended
	// without answering, and why.
	LastFailedTurn *turnNote `json:"last_failed_turn,omitempty"`
	Reassignments  int       `json:"reassignments"`
	OldKeys        []string  `json:"old_keys,omitempty"`
	MergedInto     string    `json:"merged_into,omitempty"`
	Version        int       `json:"version"`
	CreatedBy      string    `json:"created_by"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

type getOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Item       itemOut            `json:"item"`
}

func fenceAsk(e *servers.Envelope, q *question, by servers.Author) *askOut {
	if q == nil {
		return nil
	}
	return &askOut{To: q.To, Question: e.Fence(q.Text, []servers.Author{by}), Options: q.Options, Answered: q.Answered, Choice: q.Choice, AnswerBy: q.AnswerBy}
}

func (s *srv) getWorkItem(_ context.Context, _ authority.Caller, in getIn) (getOut, error) {
	var out getOut
	err := s.w.View(func(r pebble.Reader) error {
		it, err := readItem(r, in.Key)
		if err != nil {
			return err
		}
		if it == nil {
			return authority.Refuse(authority.NotFound, "No work item has the key or id %q.", in.Key)
		}
		kids, err := children(r, it.Key)
		if err != nil {
			return err
		}
		e := envelope()
		history, omitted := it.History, 0
		if len(history) > historyShown {
			omitted = len(history) - historyShown
			history = history[omitted:]
		}
		o := itemOut{Key: it.Key, ID: it.ID, Project: it.Project, Title: e.Fence(it.Title, it.titleWriters()),
			Description: e.Fence(it.Description, it.DescribedBy), Status: it.Status, Assignee: it.Assignee,
			Triage: it.Triage, Priority: it.Priority, Labels: it.Labels, Parent: it.Parent, Subtasks: kids,
			Links: it.Links, Checklist: it.Checklist, Question: fenceAsk(e, it.Question, it.CreatedBy), History: history, HistoryOmitted: omitted,
			LastFailedTurn: it.LastFailedTurn, Reassignments: it.Reassignments, OldKeys: it.OldKeys, MergedInto: it.MergedInto, Version: it.Version,
			CreatedBy: it.CreatedBy.Seat, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
		for _, c := range it.Thread {
			o.Thread = append(o.Thread, commentOut{ID: c.ID, By: c.By.Seat, At: c.At, Body: e.Fence(c.Body, []servers.Author{c.By}),
				Mentions: c.Mentions, Ask: fenceAsk(e, c.Ask, c.By), Answers: c.Answers, Choice: c.Choice})
		}
		out = getOut{Provenance: e.Provenance(), Item: o}
		return nil
	})
	return out, err
}

// ---- list_work_items ----

type listIn struct {
	Project  string `json:"project,omitempty" jsonschema:"only this project's items"`
	Status   string `json:"status,omitempty" jsonschema:"only items in this status; open means every live item (any status whose category is open or started)"`
	Assignee string `json:"assignee,omitempty" jsonschema:"only items assigned to this handle; me means you"`
	Label    string `json:"label,omitempty" jsonschema:"only items carrying this label"`
	Priority string `json:"priority,omitempty" jsonschema:"only items of this priority"`
	Parent   string `json:"parent,omitempty" jsonschema:"only subtasks of this item"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 200; default 50"`
	Cursor   string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page"`
}

type listOut struct {
	Provenance servers.Provenance `json:"provenance"`
	// Items' titles are fenced as their writers' (WR-10), as get_work_item
	// answers them.
	Items      []summary `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

func (s *srv) listWorkItems(_ context.Context, c authority.Caller, in listIn) (listOut, error) {
	var out listOut
	err := s.w.View(func(r pebble.Reader) error {
		var err error
		out, err = s.list(r, c, in)
		return err
	})
	return out, err
}

func (s *srv) list(r pebble.Reader, c authority.Caller, in listIn) (listOut, error) {
	limit, err := servers.PageLimit(in.Limit, 50, 200)
	if err != nil {
		return listOut{}, err
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
	// status "open" filters by category, so no status index serves it;
	// only then is the catalogue of statuses read.
	keep := func(sm summary) bool { return in.Status == "" || sm.Status == in.Status }
	status := in.Status
	if in.Status == openFilter {
		cat, err := readCatalogue(r)
		if err != nil {
			return listOut{}, err
		}
		keep = func(sm summary) bool { return cat.live(sm.Status) }
		status = ""
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
	case proj != "" && status != "":
		prefix = kIxStatus + proj + "/" + status + "/"
	case in.Priority != "" && proj != "":
		prefix = kIxPrio + in.Priority + "/" + proj + "/"
	case in.Priority != "":
		prefix = kIxPrio + in.Priority + "/"
	case proj != "":
		prefix = kIxProject + proj + "/"
	case status != "":
		prefix = kIxStatAll + status + "/"
	default:
		prefix = kIxProject
	}
	bound := state.Upper(prefix)
	if in.Cursor != "" {
		cur, err := base64.RawURLEncoding.DecodeString(in.Cursor)
		if err != nil || !strings.HasPrefix(string(cur), prefix) {
			return listOut{}, authority.Refuse(authority.Invalid, "cursor is not a next_cursor this list answered with these filters.")
		}
		bound = cur
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: bound})
	if err != nil {
		return listOut{}, err
	}
	defer it.Close()
	out := listOut{Items: make([]summary, 0, limit)}
	e := envelope()
	var lastKey string
	for ok := it.Last(); ok; ok = it.Prev() {
		rest := strings.TrimPrefix(string(it.Key()), prefix)
		// Every index key ends in the padded number; the project is in the
		// key only where the prefix does not already fix it.
		num, pk := rest, proj
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			num, pk = rest[i+1:], rest[:i]
			if j := strings.LastIndexByte(pk, '/'); j >= 0 {
				pk = pk[j+1:]
			}
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		var row summaryRow
		found, err := indexedSummary(r, it.Value(), pk, n, &row)
		if err != nil {
			return listOut{}, err
		}
		sm := row.summary
		if !found || !keep(sm) ||
			(proj != "" && sm.Project != proj) ||
			(in.Label != "" && !slices.Contains(sm.Labels, in.Label)) ||
			(in.Priority != "" && sm.Priority != in.Priority) ||
			(parent != "" && sm.Parent != parent) {
			continue
		}
		if len(out.Items) == limit {
			// One more item matches, so there is a next page. The cursor
			// is an exclusive upper bound: it starts below the last item
			// answered, so hand back that one's key.
			out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(lastKey))
			break
		}
		if sm, err = row.answer(r, e); err != nil {
			return listOut{}, err
		}
		out.Items = append(out.Items, sm)
		lastKey = string(it.Key())
	}
	out.Provenance = e.Provenance()
	return out, nil
}
