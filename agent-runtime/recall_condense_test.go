package agent

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/servers"
)

// OUT-2, OUT-3, BLT-1: a recalled turn's ask and account past 600 bytes
// are condensed by the seat's auxiliary model, where the turn-start
// prefetch shows them as similar prior work and where query_episodes
// answers them, labelled as condensed (by which model, from how many
// bytes) and the ask still fenced as its writer's; the second recall of
// the same texts costs no model call (the condenser's cache), and the
// turn's record keeps both whole. A short account is shown whole, and a
// text no model could condense is carried whole and unlabelled, never
// cut.
func TestRecalledTurnsCondensed(t *testing.T) {
	longAsk := "The invoice export to the accounting system times out for our largest customers. " +
		strings.Repeat("Customer Northwind has 48,000 invoices this quarter and the export stops after ten minutes with a gateway timeout. ", 8)
	longAccount := "Raised the invoice export timeout to five minutes and told billing. " +
		strings.Repeat("The export now pages through invoices 5,000 at a time, and each page commits on its own. ", 8)
	unreadable := "UNREADABLE: the payroll report is missing its totals. " + strings.Repeat("Every department's column sums to zero. ", 20)
	asks := map[string]string{
		"CX-1": longAsk,
		"CX-2": "The invoice export is timing out again for Northwind.",
		"GX-1": unreadable,
		"GX-2": "What did you do about the payroll report?",
	}
	const (
		shortAsk     = "Northwind's invoice export (48,000 invoices) times out after ten minutes."
		shortAccount = "Raised the export timeout; it now pages 5,000 invoices at a time."
	)
	turns := bySubject(map[string][]modeltest.Reply{
		"CX-1":       {comment("CX-1"), {Text: longAccount}},
		"CX-2":       {call("query_episodes", map[string]any{"query": "invoice export timing out"}), comment("CX-2"), done},
		"grace GX-1": {comment("GX-1"), {Text: "Reran the payroll report."}},
		"grace GX-2": {call("query_episodes", map[string]any{}), comment("GX-2"), done},
	})
	h, _ := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.System != condenseSystem {
			return turns(c)
		}
		text := c.Messages[0].Text
		switch {
		case strings.Contains(text, "UNREADABLE"):
			return modeltest.Reply{Status: 500, Message: "the auxiliary model is down"}
		case strings.Contains(text, "Customer Northwind"):
			return modeltest.Reply{Text: shortAsk}
		case strings.Contains(text, "pages through invoices"):
			return modeltest.Reply{Text: shortAccount}
		}
		return modeltest.Reply{Status: 500, Message: "no condensing scripted for this text"}
	}, asks, nil)
	auxCalls := func() (n int) {
		for _, c := range h.model.Requests() {
			if c.Model == auxModel {
				if c.System != condenseSystem {
					t.Errorf("the auxiliary model was asked something else: %.200q", c.System)
				}
				n++
			}
		}
		return n
	}

	first := h.turnFor("alan", "CX-1")
	if first.Outcome != Delivered || auxCalls() != 0 {
		t.Fatalf("the first turn (nothing to recall): %+v, %d condensings", first, auxCalls())
	}
	h.turnFor("alan", "CX-2")

	// The prefetch: the past turn as similar prior work, condensed.
	var opening string
	for _, c := range h.model.Requests() {
		if wokenAbout(c, "alan", "CX-2") {
			opening = c.Messages[0].Text
			break
		}
	}
	_, prior, _ := strings.Cut(opening, "## Similar prior work")
	if !strings.Contains(prior, "What woke you (condensed by ") || !strings.Contains(prior, shortAsk) ||
		!strings.Contains(prior, "What you answered (condensed by ") || !strings.Contains(prior, shortAccount) ||
		!strings.Contains(prior, auxModel) || strings.Contains(prior, "Customer Northwind has") || strings.Contains(prior, "pages through invoices") {
		t.Errorf("similar prior work:\n%s", prior)
	}

	// query_episodes answers the same, each text labelled, the ask fenced.
	res := decode[episodesOut](t, results(t, h.model, "alan", "CX-2", 0)[0])
	if len(res.Episodes) == 0 || res.Episodes[0].Turn != first.Key {
		t.Fatalf("query_episodes: %+v", res)
	}
	e := res.Episodes[0]
	if !strings.Contains(e.Ask, shortAsk) || !strings.Contains(e.Ask, servers.FenceOpen) || strings.Contains(e.Ask, "Customer Northwind has") ||
		!strings.Contains(e.AskCondensed, auxModel) || !strings.Contains(e.AskCondensed, "from 1001 bytes") {
		t.Errorf("the ask: %q (%s)", e.Ask, e.AskCondensed)
	}
	if e.Account != shortAccount || !strings.Contains(e.AccountCondensed, auxModel) || !strings.Contains(e.AccountCondensed, "from 780 bytes") {
		t.Errorf("the account: %q (%s)", e.Account, e.AccountCondensed)
	}
	// One rewrite per text: the recall mid-turn read the prefetch's.
	if n := auxCalls(); n != 2 {
		t.Errorf("%d condensing calls, want 2 (the ask and the account, once each)", n)
	}
	// The record keeps both whole.
	if rec, _, err := h.store.Turn(first.Key); err != nil || rec.Trigger != longAsk || rec.Account != longAccount {
		t.Errorf("the turn's record: %v %+v", err, rec)
	}

	// No model condenses it: carried whole and unlabelled; the short
	// account is whole as it always is.
	h.turnFor("grace", "GX-1")
	h.turnFor("grace", "GX-2")
	got := decode[episodesOut](t, results(t, h.model, "grace", "GX-2", 0)[0])
	if len(got.Episodes) != 1 {
		t.Fatalf("grace's turns: %+v", got)
	}
	g := got.Episodes[0]
	if !strings.Contains(g.Ask, unreadable) || g.AskCondensed != "" || g.Account != "Reran the payroll report." || g.AccountCondensed != "" {
		t.Errorf("an ask no model condensed: %+v", g)
	}
}
