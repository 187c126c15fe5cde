package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
)

// keepSkill keeps body as the seat's skill name, as a synthesis does.
func keepSkill(t *testing.T, s *Store, seat, name, body string) {
	t.Helper()
	rec := TurnRecord{Key: "kept-" + seat + "-" + name, Seat: seat, Woken: time.Now()}
	c := authority.Caller{Seat: seat, Kind: authority.KindAgent, Requester: "ada", TurnKey: rec.Key}
	if err := s.keepSkill(t.Context(), c, rec, name, body); err != nil {
		t.Fatal(err)
	}
}

// synthesizing turns the company's learning.synthesize_skills on for
// every seat of a harness.
func synthesizing(o *Options) {
	seat := o.Seat
	o.Seat = func(handle string) (SeatSpec, bool, error) {
		spec, ok, err := seat(handle)
		spec.SynthesizeSkills = true
		return spec, ok, err
	}
}

// synthesisAsks are the requests that asked seat's auxiliary model for a
// skill.
func synthesisAsks(m *modeltest.Server, seat string) []modeltest.Conversation {
	var out []modeltest.Conversation
	for _, c := range m.Requests() {
		if strings.HasPrefix(c.System, "You read back a turn that @"+seat+",") {
			out = append(out, c)
		}
	}
	return out
}

// BLT-1 skill synthesis, through real turns with the company's
// learning.synthesize_skills on: a delivered turn that worked through
// several distinct tools is read back by the seat's auxiliary model —
// what woke it fenced as its writer's, its calls in order, what it
// answered, the skills it has — and the procedure it proposes is kept as
// version 1 of a new skill. The seat's next turn is shown it at its start
// (the prefetch), uses it and refines it; that turn's "none" keeps
// nothing, and a later proposal under a name the seat already has keeps
// nothing either (refine_skill is how a seat corrects its skills). A turn
// of a single tool asks the auxiliary model nothing.
func TestSkillSynthesizedFromATurn(t *testing.T) {
	proposed := "1. lookup_colleague for billing's owner.\n2. query_episodes for past export failures.\n3. Page the export 5,000 invoices at a time.\n4. comment_on_work_item with what changed."
	refined := "1. Page the export 5,000 invoices at a time.\n2. comment_on_work_item with what changed, and tell billing's owner."
	asks := map[string]string{
		"SY-1": "The invoice export times out for Northwind; please fix it and tell billing.",
		"SY-2": "The invoice export timed out again, for Contoso this time.",
		"SY-3": "And once more the invoice export, for Fabrikam.",
		"GY-1": "Thanks for the release notes!",
	}
	turns := bySubject(map[string][]modeltest.Reply{
		"SY-1": {calls(
			call("lookup_colleague", map[string]any{"query": "grace"}).Calls[0],
			call("refresh_memory", map[string]any{}).Calls[0],
			call("query_episodes", map[string]any{}).Calls[0],
		), comment("SY-1"), {Text: "Paged the export and told billing."}},
		"SY-2": {calls(
			call("use_skill", map[string]any{"name": "invoice-export"}).Calls[0],
			call("refine_skill", map[string]any{"name": "invoice-export", "body": refined, "reason": "billing's owner is told in the comment"}).Calls[0],
		), comment("SY-2"), done},
		"SY-3": {calls(
			call("use_skill", map[string]any{"name": "invoice-export"}).Calls[0],
			call("refresh_memory", map[string]any{}).Calls[0],
		), comment("SY-3"), done},
		"grace GY-1": {comment("GY-1"), done},
	})
	h, _ := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if !strings.HasPrefix(c.System, "You read back a turn") {
			return turns(c)
		}
		switch text := c.UserText(); {
		case strings.Contains(text, "SY-1"):
			return modeltest.Reply{Text: "SKILL: invoice-export\n" + proposed}
		case strings.Contains(text, "SY-3"):
			return modeltest.Reply{Text: "SKILL: invoice-export\n1. Something else entirely."}
		}
		return modeltest.Reply{Text: "NONE"}
	}, asks, synthesizing)

	first := h.turnFor("alan", "SY-1")
	if first.Outcome != Delivered {
		t.Fatalf("turn %+v", first)
	}
	asked := synthesisAsks(h.model, "alan")
	if len(asked) != 1 {
		t.Fatalf("the auxiliary model was asked %d times after the first turn", len(asked))
	}
	read := asked[0].UserText()
	if asked[0].Model != auxModel || len(asked[0].Tools) != 0 || !strings.Contains(read, asks["SY-1"]) || !strings.Contains(read, "by=@ada") ||
		!strings.Contains(read, `1. lookup_colleague {"query":"grace"}`) || !strings.Contains(read, "4. comment_on_work_item") ||
		!strings.Contains(read, "Paged the export and told billing.") || !strings.Contains(read, "The seat has no skills yet.") {
		t.Errorf("the turn as the auxiliary model read it (model %s):\n%s", asked[0].Model, read)
	}
	s := storedSkill(t, h.store, "alan", "invoice-export")
	if len(s.Versions) != 1 || s.Versions[0].Version != 1 || s.Versions[0].Body != proposed || s.Versions[0].Turn != first.Key ||
		!strings.Contains(s.Versions[0].Reason, first.Key) {
		t.Fatalf("the synthesized skill: %+v", s)
	}

	// The next turn is shown it, uses it and refines it.
	h.turnFor("alan", "SY-2")
	for _, c := range h.model.Requests() {
		if wokenAbout(c, "alan", "SY-2") {
			if !strings.Contains(c.Messages[0].Text, "### invoice-export (version 1)\n"+proposed) {
				t.Errorf("the next turn's opening:\n%s", c.Messages[0].Text)
			}
			break
		}
	}
	used := results(t, h.model, "alan", "SY-2", 0)
	if u := decode[useSkillOut](t, used[0]); u.Body != proposed || u.Version != 1 {
		t.Errorf("used: %+v", u)
	}
	if r := decode[refineSkillOut](t, used[1]); r.Outcome != "applied" || r.Version != 2 {
		t.Errorf("refined: %+v", r)
	}
	// That turn's "none" kept nothing; the model was shown the skill it has.
	asked = synthesisAsks(h.model, "alan")
	if len(asked) != 2 || !strings.Contains(asked[1].UserText(), "The seat's skills already: invoice-export.") {
		t.Fatalf("the second synthesis: %d asks", len(asked))
	}
	if all, err := h.store.skills("alan"); err != nil || len(all) != 1 {
		t.Errorf("after a none: %+v %v", all, err)
	}

	// A proposal under a name the seat has keeps nothing.
	h.turnFor("alan", "SY-3")
	if n := len(synthesisAsks(h.model, "alan")); n != 3 {
		t.Fatalf("the third synthesis: %d asks", n)
	}
	if s := storedSkill(t, h.store, "alan", "invoice-export"); len(s.Versions) != 2 || s.Versions[1].Body != refined {
		t.Errorf("a proposal under a name the seat has changed it: %+v", s.Versions)
	}

	// A turn of one tool is read for nothing.
	if rec := h.turnFor("grace", "GY-1"); rec.Outcome != Delivered {
		t.Fatalf("grace's turn: %+v", rec)
	}
	if n := len(synthesisAsks(h.model, "grace")); n != 0 {
		t.Errorf("a one-tool turn asked the auxiliary model %d times", n)
	}
}

// BLT-1: skill synthesis is off unless the company turns it on — the same
// turn of several tools makes no call on the auxiliary model and keeps no
// skill.
func TestSkillSynthesisOffByDefault(t *testing.T) {
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"SY-1": {calls(
			call("lookup_colleague", map[string]any{"query": "grace"}).Calls[0],
			call("refresh_memory", map[string]any{}).Calls[0],
			call("query_episodes", map[string]any{}).Calls[0],
		), comment("SY-1"), {Text: "Paged the export and told billing."}},
	}), nil, nil)
	if rec := h.turnFor("alan", "SY-1"); rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
	for _, c := range h.model.Requests() {
		if c.Model == auxModel {
			t.Errorf("the auxiliary model was asked: %.120q", c.System)
		}
	}
	if h.model.Count() != 3 {
		t.Errorf("%d model calls, want the turn's 3", h.model.Count())
	}
	if all, err := h.store.skills("alan"); err != nil || len(all) != 0 {
		t.Errorf("skills kept: %+v %v", all, err)
	}
}
