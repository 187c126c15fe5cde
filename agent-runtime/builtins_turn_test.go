package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BLT-1: each builtin driven through a seat's real turn. The seat's model
// is the fake model server, the builtins are the engine's own MCP server
// over a real client, called as the turn's caller, and what they keep is
// on a real state node; a test reads back what a call changed, in a later
// turn of its own, as the seat would.

// builtinSurface is a seat's surface of the engine's builtins, beside
// tools answered here: a comment tool that delivers, so a turn that
// answered somebody ends delivered without a reminder round, and whatever
// a test adds.
type builtinSurface struct {
	client *serverstest.Client
	tools  []Tool
	// local are the answers of the tools answered here, by name.
	local map[string]string
	// episodes is the search of past turns query_episodes ranks by
	// meaning, over the fake embeddings provider.
	episodes *search.Index
}

func newBuiltinSurface(t *testing.T, store *Store, condense *Condenser) *builtinSurface {
	t.Helper()
	p := searchtest.NewProvider(t)
	ix, err := OpenEpisodeSearch(t.Context(), store.Node(), filepath.Join(t.TempDir(), "search"),
		search.NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	deps := BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() }, Store: store, Episodes: ix, Condense: condense.Condense}
	s := builtinSurfaceOf(t, deps)
	s.episodes = ix
	return s
}

// builtinSurfaceOf is the surface of the builtins deps registers, over a
// real client of their server.
func builtinSurfaceOf(t *testing.T, deps BuiltinDeps) *builtinSurface {
	t.Helper()
	c := serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return NewBuiltinServer(deps, tr, nil) })
	lt, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]json.RawMessage{}
	for _, tool := range lt.Tools {
		schemas[tool.Name], _ = json.Marshal(tool.InputSchema)
	}
	s := &builtinSurface{client: c, local: map[string]string{}}
	for _, row := range BuiltinTools(deps) {
		s.tools = append(s.tools, Tool{Name: row.Name, Description: row.Description, Schema: schemas[row.Name],
			Hints: row.Hints, Delivers: row.Delivers, Source: "builtin"})
	}
	s.add(commentTool, `{"outcome":"applied"}`)
	return s
}

// add offers a tool answered here, always with answer.
func (s *builtinSurface) add(tool Tool, answer string) {
	s.tools = append(s.tools, tool)
	s.local[tool.Name] = answer
}

func (s *builtinSurface) Tools() []Tool { return s.tools }

func (s *builtinSurface) Call(ctx context.Context, c authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	if answer, ok := s.local[name]; ok {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}}
	}
	var in map[string]any
	if err := json.Unmarshal(args, &in); err != nil {
		return servers.Refused(authority.Refuse(authority.Invalid, "arguments are not a JSON object: %v", err))
	}
	res, err := s.client.CS.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: in, Meta: servers.CallerMeta(c, s.client.Proof)})
	if err != nil {
		return servers.Refused(authority.Refuse(authority.Unavailable, "the builtins' server did not answer: %v", err))
	}
	return res
}

// builtinHub hands every seat the builtin surface.
type builtinHub struct{ s *builtinSurface }

func (h builtinHub) Surface(string) Surface                  { return h.s }
func (builtinHub) ClaimSeat(context.Context, string) error   { return nil }
func (builtinHub) ReleaseSeat(context.Context, string) error { return nil }

// auxModel is the auxiliary model of every seat of a builtin harness, on
// the same fake model server as the seats' own.
const auxModel = "m-aux"

// newBuiltinHarness is a harness whose seats call the real builtins.
// asks, if set, are the texts that wake a seat, by subject.
func newBuiltinHarness(t *testing.T, script modeltest.Script, asks map[string]string, opts func(*Options)) (*harness, *builtinSurface) {
	t.Helper()
	var surf *builtinSurface
	var rt *Runtime
	h := newHarness(t, script, nil, func(o *Options) {
		seat, _, _ := o.Seat("alan")
		aux := seat.Model
		aux.Model = auxModel
		o.Auxiliary = func(string) (ModelSpec, bool, error) { return aux, true, nil }
		condense := NewCondenser(AuxiliaryDeps{Model: o.Auxiliary, Runtime: func() *Runtime { return rt }})
		surf = newBuiltinSurface(t, o.Store, condense)
		o.Hub = builtinHub{surf}
		if opts != nil {
			opts(o)
		}
	})
	rt = h.rt
	if asks != nil {
		h.feed.Trigger = func(w servers.Wake) (Trigger, error) {
			return Trigger{Text: asks[w.Subject], Author: servers.Author{Seat: w.By, Kind: authority.KindHuman}, About: "a comment on " + w.Subject}, nil
		}
	}
	return h, surf
}

// turnFor runs one turn of seat, woken by ada about subject, to its end.
func (h *harness) turnFor(seat, subject string) TurnRecord {
	h.t.Helper()
	h.n++
	w := servers.Wake{Cursor: fmt.Sprintf("%016x/0001", h.n), Seat: seat, Subject: subject, By: "ada", At: time.Now()}
	rec, err := h.rt.begin(h.t.Context(), h.feed, w)
	if err != nil {
		h.t.Fatal(err)
	}
	h.rt.runTurn(h.t.Context(), rec)
	got, found, err := h.store.Turn(rec.Key)
	if err != nil || !found || got.Running() {
		h.t.Fatalf("turn %s: %+v %v %v", rec.Key, got, found, err)
	}
	// The next turn starts once the search of past turns has read this
	// one, as a seat's next turn comes long after on a running hub.
	if b, ok := h.rt.opts.Hub.(builtinHub); ok {
		if err := b.s.episodes.WaitEmbedded(h.t.Context(), h.store.Node().Position()); err != nil {
			h.t.Fatal(err)
		}
	}
	return got
}

// bySubject answers each turn from its own steps, the turn picked by the
// subject its opening names (and, for the seat, by the system text): the
// nth model round of that turn gets the nth reply. A seat's onboarding
// pass is answered from the steps under "onboarding <seat>".
func bySubject(turns map[string][]modeltest.Reply) modeltest.Script {
	return func(c modeltest.Conversation) modeltest.Reply {
		for key, steps := range turns {
			if seat, ok := strings.CutPrefix(key, "onboarding "); ok {
				if strings.HasPrefix(c.System, "This is the onboarding pass of @"+seat+",") {
					return steps[min(c.Round(), len(steps)-1)]
				}
				continue
			}
			seat, subject, ok := strings.Cut(key, " ")
			if !ok {
				seat, subject = "alan", key
			}
			if wokenAbout(c, seat, subject) {
				return steps[min(c.Round(), len(steps)-1)]
			}
		}
		return modeltest.Reply{Text: "no script for this turn", Status: 500, Message: "no script for this turn"}
	}
}

// wokenAbout reports whether c is of seat's turn about subject: the
// opening's first line says what woke it (what the seat recalled, below,
// may name other subjects).
func wokenAbout(c modeltest.Conversation, seat, subject string) bool {
	if len(c.Messages) == 0 || !strings.Contains(c.System, "You are @"+seat+",") {
		return false
	}
	first, _, _ := strings.Cut(c.Messages[0].Text, "\n")
	return strings.Contains(first, subject)
}

// results are the tool results seat's turn about subject read after its
// round of calls number round (0 for the first), in order.
func results(t *testing.T, m *modeltest.Server, seat, subject string, round int) []modeltest.Result {
	t.Helper()
	for _, c := range m.Requests() {
		if wokenAbout(c, seat, subject) && c.Round() == round+1 {
			return c.LastResults()
		}
	}
	t.Fatalf("no request of @%s's turn about %s after round %d", seat, subject, round)
	return nil
}

// decode reads a builtin's answer as the model read it.
func decode[T any](t *testing.T, r modeltest.Result) T {
	t.Helper()
	var out T
	if r.IsError {
		t.Fatalf("refused: %s", r.Text)
	}
	if err := json.Unmarshal([]byte(r.Text), &out); err != nil {
		t.Fatalf("%q: %v", r.Text, err)
	}
	return out
}

func calls(cs ...modeltest.Call) modeltest.Reply { return modeltest.Reply{Calls: cs} }

func comment(subject string) modeltest.Reply {
	return call("comment_on_work_item", map[string]any{"key": subject, "body": "done"})
}

// BLT-1 reflect_and_persist and refresh_memory: a note kept in one turn is
// read back whole in a later one, by what the turn turns out to be about
// (a note sharing nothing with the query is left out and counted) or, with
// no query, with every long note and the recent short ones. The diary is
// the seat's own: a colleague's turn recalls none of it. A note past its
// bound is refused naming the field and the limit, and nothing is kept
// (OUT-2's refuse shape).
func TestDiaryKeptAndRecalledThroughTurns(t *testing.T) {
	backup := "The staging database is restored every Sunday night from Friday's backup, so data written on Saturday is lost."
	freeze := "Deploy freeze until Thursday for the billing release."
	long := strings.Repeat("x", maxNote+1)
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"MEM-1": {calls(
			modeltest.Call{Name: "reflect_and_persist", Args: map[string]any{"note": backup, "kind": "long"}},
			modeltest.Call{Name: "reflect_and_persist", Args: map[string]any{"note": freeze, "kind": "short"}},
			modeltest.Call{Name: "reflect_and_persist", Args: map[string]any{"note": long}},
		), comment("MEM-1"), done},
		"MEM-2": {calls(
			modeltest.Call{Name: "refresh_memory", Args: map[string]any{"query": "why did the staging database lose Saturday's data?"}},
			modeltest.Call{Name: "refresh_memory", Args: map[string]any{}},
		), comment("MEM-2"), done},
		"grace MEM-3": {call("refresh_memory", map[string]any{}), comment("MEM-3"), done},
	}), nil, nil)

	if rec := h.turnFor("alan", "MEM-1"); rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
	kept := results(t, h.model, "alan", "MEM-1", 0)
	if len(kept) != 3 {
		t.Fatalf("results %+v", kept)
	}
	for i, kind := range []string{"long", "short"} {
		if out := decode[reflectOut](t, kept[i]); out.Outcome != "applied" || out.Kind != kind {
			t.Errorf("note %d: %+v", i, out)
		}
	}
	if r := kept[2]; !strings.HasPrefix(r.Text, "Refused (invalid)") || !strings.Contains(r.Text, "note is 4001 bytes") || !strings.Contains(r.Text, "at most 4000") {
		t.Errorf("a note past its bound: %+v", r)
	}

	h.turnFor("alan", "MEM-2")
	recalled := results(t, h.model, "alan", "MEM-2", 0)
	byQuery := decode[refreshOut](t, recalled[0])
	if len(byQuery.Notes) != 1 || byQuery.Notes[0].Note != backup || byQuery.Notes[0].Kind != "long" || byQuery.Left != 1 {
		t.Errorf("recalled by the query: %+v", byQuery)
	}
	all := decode[refreshOut](t, recalled[1])
	if len(all.Notes) != 2 || all.Notes[0].Note != freeze || all.Notes[1].Note != backup {
		t.Errorf("recalled without a query: %+v", all)
	}

	h.turnFor("grace", "MEM-3")
	if theirs := decode[refreshOut](t, results(t, h.model, "grace", "MEM-3", 0)[0]); len(theirs.Notes) != 0 {
		t.Errorf("a colleague recalled alan's diary: %+v", theirs)
	}
}

// BLT-1 query_episodes: a seat recalls its own past turns — what woke
// each (fenced as its writer's), what it answered and how it ended — by
// what they were about (the turn about the failing invoice export ranks
// first for a question about it, whose words and meaning both match, and
// for one that shares only its meaning), by conversation (the turns about
// one item) and most recent first. A colleague recalls none of them.
func TestEpisodesRecalledThroughTurns(t *testing.T) {
	asks := map[string]string{
		"EP-1": "The invoice export to the accounting system times out for our largest customers.",
		"EP-2": "Please update the onboarding checklist for new designers.",
		"EP-3": "A customer says the invoice export is failing again; what did we do last time?",
		"EP-4": "What have you worked on lately?",
	}
	answer := func(subject, text string) []modeltest.Reply {
		return []modeltest.Reply{comment(subject), {Text: text}}
	}
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"EP-1": answer("EP-1", "Raised the invoice export timeout to five minutes and told billing."),
		"EP-2": answer("EP-2", "Added the design tool accounts to the checklist."),
		"EP-3": {calls(
			modeltest.Call{Name: "query_episodes", Args: map[string]any{"query": "invoice export timing out"}},
			modeltest.Call{Name: "query_episodes", Args: map[string]any{"conversation": "EP-2"}},
			modeltest.Call{Name: "query_episodes", Args: map[string]any{}},
			modeltest.Call{Name: "query_episodes", Args: map[string]any{"query": "a refund of a payment"}},
		), comment("EP-3"), done},
		"grace EP-4": {call("query_episodes", map[string]any{}), comment("EP-4"), done},
	}), asks, nil)
	first := h.turnFor("alan", "EP-1")
	second := h.turnFor("alan", "EP-2")
	h.turnFor("alan", "EP-3")

	res := results(t, h.model, "alan", "EP-3", 0)
	byMeaning := decode[episodesOut](t, res[0])
	if len(byMeaning.Episodes) == 0 {
		t.Fatalf("nothing recalled for the invoice export: %+v", byMeaning)
	}
	got := byMeaning.Episodes[0]
	if got.Turn != first.Key || got.Subject != "EP-1" || got.Outcome != Delivered || got.Requester != "ada" ||
		got.Account != "Raised the invoice export timeout to five minutes and told billing." ||
		!strings.Contains(got.Ask, servers.FenceOpen) || !strings.Contains(got.Ask, asks["EP-1"]) {
		t.Errorf("the invoice export's turn is not recalled first, whole: %+v", byMeaning)
	}
	if conv := decode[episodesOut](t, res[1]); len(conv.Episodes) != 1 || conv.Episodes[0].Turn != second.Key {
		t.Errorf("by conversation: %+v", conv)
	}
	recent := decode[episodesOut](t, res[2])
	if len(recent.Episodes) != 2 || recent.Episodes[0].Turn != second.Key || recent.Episodes[1].Turn != first.Key {
		t.Errorf("most recent first: %+v", recent)
	}

	// By meaning alone: no word of the query is in any turn, and the
	// invoice export's turn is the one about money.
	if meant := decode[episodesOut](t, res[3]); len(meant.Episodes) == 0 || meant.Episodes[0].Turn != first.Key {
		t.Errorf("by meaning alone: %+v", meant)
	}

	h.turnFor("grace", "EP-4")
	if theirs := decode[episodesOut](t, results(t, h.model, "grace", "EP-4", 0)[0]); len(theirs.Episodes) != 0 {
		t.Errorf("a colleague recalled alan's turns: %+v", theirs)
	}
}

// BLT-1 use_skill and refine_skill: before the seat has any skill, both
// are not_found (refine_skill corrects a skill, it starts none); a skill
// kept for the seat is used in its next turn, refined there with a
// reason, and used again as the new body, the previous version kept
// beside it. A name the seat has no skill by is not_found, naming the
// ones it has; a colleague has none of them. A reason past its bound is
// refused naming the field and the limit, and nothing is written (OUT-2's
// refuse shape).
func TestSkillUsedAndRefinedThroughTurns(t *testing.T) {
	v1 := "1. Collect the merged pull requests since the last tag.\n2. Group them by label.\n3. Post the notes on the release item."
	v2 := "1. Tag the release first, so the range is fixed.\n2. Collect the merged pull requests since the previous tag.\n3. Group them by label.\n4. Post the notes on the release item."
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"SK-1": {calls(
			modeltest.Call{Name: "use_skill", Args: map[string]any{"name": "release-notes"}},
			modeltest.Call{Name: "refine_skill", Args: map[string]any{"name": "release-notes", "body": v1, "reason": "first written down"}},
		), comment("SK-1"), done},
		"SK-2": {
			call("use_skill", map[string]any{"name": "release-notes"}),
			calls(
				modeltest.Call{Name: "refine_skill", Args: map[string]any{"name": "release-notes", "body": v2, "reason": strings.Repeat("r", maxReason+1)}},
				modeltest.Call{Name: "refine_skill", Args: map[string]any{"name": "release-notes", "body": v2, "reason": "the range moved when a fix merged before tagging"}},
			),
			calls(
				modeltest.Call{Name: "use_skill", Args: map[string]any{"name": "release-notes"}},
				modeltest.Call{Name: "use_skill", Args: map[string]any{"name": "deploy"}},
				modeltest.Call{Name: "refine_skill", Args: map[string]any{"name": "deploy", "body": "1. Ship it.", "reason": "a new one"}},
			),
			comment("SK-2"), done},
		"grace SK-3": {call("use_skill", map[string]any{"name": "release-notes"}), comment("SK-3"), done},
	}), nil, nil)

	h.turnFor("alan", "SK-1")
	first := results(t, h.model, "alan", "SK-1", 0)
	for i, tool := range []string{"use_skill", "refine_skill"} {
		if r := first[i]; !strings.HasPrefix(r.Text, "Refused (not_found)") || !strings.Contains(r.Text, "no skills yet") {
			t.Errorf("%s before any skill: %+v", tool, r)
		}
	}
	if s := storedSkill(t, h.store, "alan", "release-notes"); len(s.Versions) != 0 {
		t.Fatalf("refine_skill started a skill: %+v", s)
	}
	keepSkill(t, h.store, "alan", "release-notes", v1)

	h.turnFor("alan", "SK-2")
	if used := decode[useSkillOut](t, results(t, h.model, "alan", "SK-2", 0)[0]); used.Body != v1 || used.Version != 1 || used.Versions != 1 {
		t.Errorf("used in the next turn: %+v", used)
	}
	refined := results(t, h.model, "alan", "SK-2", 1)
	if r := refined[0]; !strings.HasPrefix(r.Text, "Refused (invalid)") || !strings.Contains(r.Text, "reason is 601 bytes") || !strings.Contains(r.Text, "at most 600") {
		t.Errorf("a reason past its bound: %+v", r)
	}
	if out := decode[refineSkillOut](t, refined[1]); out.Outcome != "applied" || out.Version != 2 {
		t.Errorf("refined: %+v", out)
	}
	again := results(t, h.model, "alan", "SK-2", 2)
	if used := decode[useSkillOut](t, again[0]); used.Body != v2 || used.Version != 2 || used.Versions != 2 {
		t.Errorf("used after refining: %+v", used)
	}
	if r := again[1]; !strings.HasPrefix(r.Text, "Refused (not_found)") || !strings.Contains(r.Text, `"deploy"`) || !strings.Contains(r.Text, "release-notes") {
		t.Errorf("an unknown skill: %+v", r)
	}
	if r := again[2]; !strings.HasPrefix(r.Text, "Refused (not_found)") || !strings.Contains(r.Text, `"deploy"`) || !strings.Contains(r.Text, "release-notes") {
		t.Errorf("refining an unknown skill: %+v", r)
	}
	if s := storedSkill(t, h.store, "alan", "deploy"); len(s.Versions) != 0 {
		t.Errorf("refine_skill started a skill: %+v", s)
	}
	// The previous version is kept, with what the refinement said was
	// wrong with it.
	s := storedSkill(t, h.store, "alan", "release-notes")
	if len(s.Versions) != 2 || s.Versions[0].Body != v1 || s.Versions[1].Body != v2 ||
		s.Versions[1].Reason != "the range moved when a fix merged before tagging" {
		t.Errorf("versions kept: %+v", s.Versions)
	}

	h.turnFor("grace", "SK-3")
	if r := results(t, h.model, "grace", "SK-3", 0)[0]; !strings.HasPrefix(r.Text, "Refused (not_found)") {
		t.Errorf("a colleague used alan's skill: %+v", r)
	}
}

// storedSkill reads a seat's skill with every version it had.
func storedSkill(t *testing.T, s *Store, seat, name string) skill {
	t.Helper()
	var sk skill
	if err := s.view(func(r pebble.Reader) error {
		_, err := state.GetJSON(r, kSkill+seat+"/"+name, &sk)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return sk
}

// BLT-1 a2a_ask, and the agent-to-agent wake: alan's turn asks grace one
// question; the ask wakes grace on the runtime's own feed, grace's turn
// reads the question fenced as alan's and answers it, and alan's call
// comes back with that answer fenced as grace's words. Grace's turn acts
// for alan, is not offered a2a_ask (no chain of seats waiting on each
// other), and ends delivered with its answer alone, since its asker reads
// it. Asking again in the same turn is the same question: it wakes
// nobody twice and answers the same.
func TestA2AAskWakesTheColleague(t *testing.T) {
	question := "What port does the staging API listen on?"
	ask := modeltest.Call{Name: "a2a_ask", Args: map[string]any{"to": "@grace", "question": question}}
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"CORE-1":        {call("a2a_ask", map[string]any{"to": "alan", "question": "Me?"}), calls(ask), calls(ask), comment("CORE-1"), done},
		"grace a2a_ask": {{Text: "Port 8443, behind the internal load balancer."}},
	}), nil, nil)
	feed := &memFeed{}
	h.rt.opts.Feeds = []Feed{A2AFeed(h.store), FeedOf("mem", feed.read, h.feed.Trigger)}
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	key := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()})
	if rec := waitEnded(t, h.store, key); rec.Outcome != Delivered {
		t.Fatalf("alan's turn: %+v", rec)
	}

	if r := results(t, h.model, "alan", "CORE-1", 0)[0]; !strings.HasPrefix(r.Text, "Refused (invalid)") || !strings.Contains(r.Text, "names you") {
		t.Errorf("asking oneself: %+v", r)
	}
	answered := decode[askOut](t, results(t, h.model, "alan", "CORE-1", 1)[0])
	if answered.To != "grace" || answered.Outcome != Delivered || !strings.Contains(answered.Answer, "Port 8443, behind the internal load balancer.") ||
		!strings.Contains(answered.Answer, servers.FenceOpen) || !strings.Contains(answered.Answer, "@grace") {
		t.Errorf("alan's answer: %+v", answered)
	}
	if again := decode[askOut](t, results(t, h.model, "alan", "CORE-1", 2)[0]); again != answered {
		t.Errorf("asked again: %+v", again)
	}

	eps, err := h.store.Episodes("grace", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 {
		t.Fatalf("grace ran %d turns: %+v", len(eps), eps)
	}
	g := eps[0]
	if g.Feed != A2AFeedName || g.Requester != "alan" || g.Trigger != question || g.TriggerBy.Seat != "alan" ||
		g.Outcome != Delivered || g.Account != "Port 8443, behind the internal load balancer." {
		t.Errorf("grace's turn: %+v", g)
	}
	var graceReqs int
	for _, c := range h.model.Requests() {
		if strings.Contains(c.System, "You are @grace,") {
			graceReqs++
			if c.Offers("a2a_ask") || !strings.Contains(c.Messages[0].Text, question) || !strings.Contains(c.Messages[0].Text, "by=@alan") {
				t.Errorf("grace's turn was shown %v, opening %q", c.Tools, c.Messages[0].Text)
			}
		}
	}
	if graceReqs != 1 {
		t.Errorf("grace's model was asked %d times", graceReqs)
	}
}
