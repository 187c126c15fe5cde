package agent

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/servers"
)

// Knowledge reads a test's seat is offered: the native knowledge base's
// search and page read, answered as it answers them.
var (
	pageTool       = Tool{Name: "get_page", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}}
	onboardingHits = `{"mode":"keyword","pages":[{"id":"pg_1","title":"Engineering onboarding","container":"ENG","score":1}]}`
	onboardingPage = `{"page":{"id":"pg_1","title":"Engineering onboarding","body":"Deploys go out on the Tuesday release train; never deploy on a Friday."}}`
)

func isPass(c modeltest.Conversation) bool {
	return strings.HasPrefix(c.System, "This is the onboarding pass of @")
}

// BLT-1 mark_onboarded and the onboarding pass: a seat that has not
// stamped its mark, in a company whose knowledge base has pages about
// onboarding, reads them before its first turn's work in a pass of its
// own — offered the read-only tools and mark_onboarded, nothing that
// writes or delivers — and stamps the mark with what it took from them (a
// note past its bound refused, naming the field and the limit, and
// stamping nothing). The turn then opens with that note and is never
// offered mark_onboarded; a call made anyway is refused forbidden. Marked,
// the seat's next turn runs no pass. Where the knowledge base has no page
// about onboarding there is nothing to read: no pass, no mark.
func TestOnboardingPass(t *testing.T) {
	note := "Deploys go out on the Tuesday release train, never on a Friday."
	h, surf := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"onboarding alan": {
			call("get_page", map[string]any{"id": "pg_1"}),
			call("mark_onboarded", map[string]any{"note": strings.Repeat("n", maxNote+1)}),
			call("mark_onboarded", map[string]any{"note": note}),
		},
		"ON-1": {comment("ON-1"), done},
		"ON-2": {call("mark_onboarded", map[string]any{"note": "again"}), comment("ON-2"), done},
	}), nil, nil)
	surf.add(searchTool, onboardingHits)
	surf.add(pageTool, onboardingPage)

	if rec := h.turnFor("alan", "ON-1"); rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
	var pass, turn []modeltest.Conversation
	for _, c := range h.model.Requests() {
		if isPass(c) {
			pass = append(pass, c)
		} else {
			turn = append(turn, c)
		}
	}
	if len(pass) != 3 {
		t.Fatalf("the pass made %d model calls", len(pass))
	}
	offered := pass[0].Tools
	for _, want := range []string{"mark_onboarded", "get_page", "search_knowledge", "refresh_memory"} {
		if !pass[0].Offers(want) {
			t.Errorf("the pass is not offered %s: %v", want, offered)
		}
	}
	for _, never := range []string{"comment_on_work_item", "reflect_and_persist", "refine_skill", "a2a_ask", "delegate"} {
		if pass[0].Offers(never) {
			t.Errorf("the pass is offered %s: %v", never, offered)
		}
	}
	if !strings.Contains(pass[0].UserText(), "Engineering onboarding") || !strings.Contains(pass[0].System, "the Engineer of the core unit") {
		t.Errorf("the pass was told %q\n%s", pass[0].System, pass[0].UserText())
	}
	if r := pass[1].LastResults(); len(r) != 1 || r[0].Text != onboardingPage {
		t.Errorf("the page read: %+v", r)
	}
	if r := pass[2].LastResults(); len(r) != 1 || !strings.HasPrefix(r[0].Text, "Refused (invalid)") || !strings.Contains(r[0].Text, "note is 4001 bytes") {
		t.Errorf("a note past its bound: %+v", r)
	}
	if !h.store.Onboarded("alan") {
		t.Fatal("the pass did not stamp the mark")
	}
	if m, _ := h.store.onboarding("alan"); m.Note != note {
		t.Errorf("the mark says %q", m.Note)
	}
	for _, c := range turn {
		if c.Offers("mark_onboarded") {
			t.Fatalf("the turn is offered mark_onboarded: %v", c.Tools)
		}
	}
	if !strings.Contains(turn[0].Messages[0].Text, "## Onboarding\nBefore this turn you read your onboarding pages and noted: "+note) {
		t.Errorf("the turn's opening:\n%s", turn[0].Messages[0].Text)
	}

	h.turnFor("alan", "ON-2")
	for _, c := range h.model.Requests()[len(pass)+len(turn):] {
		if isPass(c) || strings.Contains(c.Messages[0].Text, "## Onboarding") {
			t.Fatalf("an onboarded seat's turn ran the pass again:\n%s", c.Messages[0].Text)
		}
	}
	if r := results(t, h.model, "alan", "ON-2", 0)[0]; !strings.HasPrefix(r.Text, "Refused (forbidden)") || !strings.Contains(r.Text, "not offered") {
		t.Errorf("mark_onboarded in a turn: %+v", r)
	}

	// Nothing to read: no pass, no mark.
	h, surf = newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{"ON-3": {comment("ON-3"), done}}), nil, nil)
	surf.add(searchTool, `{"mode":"keyword","pages":[]}`)
	h.turnFor("grace", "ON-3")
	for _, c := range h.model.Requests() {
		if isPass(c) || c.Offers("mark_onboarded") {
			t.Fatalf("with no onboarding page to read, a pass ran or the turn was offered the mark: %v", c.Tools)
		}
	}
	if h.store.Onboarded("grace") {
		t.Fatal("marked without a pass")
	}
}
