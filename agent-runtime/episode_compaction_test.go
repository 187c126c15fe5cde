package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// endedAt records a turn of seat as started and ended at at, as the log
// of a hub that ran it then keeps it.
func endedAt(t *testing.T, store *Store, seat, key, task, account string, at time.Time) {
	t.Helper()
	rec := TurnRecord{Key: key, Seat: seat, Feed: "test", Cursor: key, Subject: key, Requester: "ada", Woken: at,
		Trigger: task, TriggerBy: servers.Author{Seat: "ada", Kind: authority.KindHuman}, About: "a comment on " + key}
	end := endPayload{Key: key, Outcome: Delivered, Delivered: true, Account: account}
	for _, op := range []struct {
		kind    string
		payload any
	}{{kindStarted, rec}, {kindEnded, end}} {
		args, _ := json.Marshal(map[string]string{"turn": key})
		body, err := json.Marshal(op.payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Node().Write(t.Context(), state.Op{ID: state.DeriveOpID(key, at, op.kind, args), Tool: op.kind, Args: args,
			Kind: op.kind, Payload: body, Caller: seatCaller(rec), At: at}); err != nil {
			t.Fatal(err)
		}
	}
}

// OUT-2, BLT-1: the first turn to end after a month closed folds the
// seat's turns of every closed month not yet compacted into one record
// each, by the seat's auxiliary model. A task or outcome past 2 KiB is
// condensed first (labelled, by the same model, from how many bytes);
// one no model condenses is given by its size and digest, never cut. The
// record is kept on the log and query_episodes finds it by meaning,
// labelled with how it was made, while the compacted turns are still
// recalled whole. A later turn compacts nothing again, and another seat's
// turns are in no record of alan's.
func TestMonthlyCompaction(t *testing.T) {
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastMonth, monthBefore := thisMonth.AddDate(0, -1, 0), thisMonth.AddDate(0, -2, 0)

	longTask := "The invoice export to the accounting system times out for our largest customers. " +
		strings.Repeat("Customer Northwind has 48,000 invoices this quarter and the export stops after ten minutes with a gateway timeout. ", 25)
	uncondensable := "UNCONDENSABLE: the payroll report is missing its totals. " + strings.Repeat("Every department's column sums to zero again. ", 60)
	if len(longTask) <= compactTextBytes || len(uncondensable) <= compactTextBytes {
		t.Fatalf("the texts are %d and %d bytes", len(longTask), len(uncondensable))
	}
	const (
		shortTask = "Northwind's invoice export (48,000 invoices) times out after ten minutes."
		summary   = "You fixed the Northwind invoice export timeout by paging the export, and looked into the payroll report's missing totals."
		earlier   = "You set up the quarterly close checklist."
	)
	turns := bySubject(map[string][]modeltest.Reply{
		"CX-9":  {comment("CX-9"), done},
		"CX-10": {comment("CX-10"), done},
	})
	h, surf := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		switch {
		case c.System == compactSystem && strings.Contains(c.Messages[0].Text, "quarterly close"):
			return modeltest.Reply{Text: earlier}
		case c.System == compactSystem:
			return modeltest.Reply{Text: summary}
		case c.System == condenseSystem && strings.Contains(c.Messages[0].Text, "UNCONDENSABLE"):
			return modeltest.Reply{Status: 500, Message: "the auxiliary model is down"}
		case c.System == condenseSystem && strings.Contains(c.Messages[0].Text, "Customer Northwind"):
			return modeltest.Reply{Text: shortTask}
		case c.System == condenseSystem:
			return modeltest.Reply{Status: 500, Message: "no condensing scripted for this text"}
		}
		return turns(c)
	}, map[string]string{"CX-9": "Is the Northwind export fixed for good?", "CX-10": "Anything else on Northwind?"}, nil)

	endedAt(t, h.store, "alan", "old-close", "Please set up the quarterly close checklist.", "Done: the checklist is on the board.", monthBefore.Add(48*time.Hour))
	endedAt(t, h.store, "alan", "old-export", longTask, "Paged the export 5,000 invoices at a time.", lastMonth.Add(24*time.Hour))
	endedAt(t, h.store, "alan", "old-payroll", "Why does the payroll report have no totals?", uncondensable, lastMonth.Add(72*time.Hour))
	endedAt(t, h.store, "grace", "old-grace", "Grace's own work on the fleet's cars.", "Booked a garage.", lastMonth.Add(96*time.Hour))
	compactions := func() (out []string) {
		for _, c := range h.model.Requests() {
			if c.System == compactSystem {
				out = append(out, c.Messages[0].Text)
			}
		}
		return out
	}

	h.turnFor("alan", "CX-9")
	asked := compactions()
	if len(asked) != 2 || !strings.Contains(asked[0], "quarterly close") || !strings.Contains(asked[1], "Northwind") {
		t.Fatalf("the compaction calls, oldest month first: %d\n%.3000s", len(asked), strings.Join(asked, "\n----\n"))
	}
	read := asked[1]
	if !strings.Contains(read, shortTask) || !strings.Contains(read, "(condensed by "+auxModel) ||
		!strings.Contains(read, fmt.Sprintf("from %d bytes)", len(longTask))) ||
		strings.Contains(read, "Customer Northwind has") {
		t.Errorf("the long task was not read condensed and labelled:\n%.3000s", read)
	}
	if !strings.Contains(read, fmt.Sprintf("a text of %d bytes, sha256 %s", len(uncondensable), state.Digest([]byte(uncondensable)))) ||
		strings.Contains(read, "UNCONDENSABLE") || strings.Contains(read, "sums to zero") {
		t.Errorf("the outcome no model condensed was not given by its size and digest:\n%.3000s", read)
	}
	if strings.Contains(read, "garage") || strings.Contains(read, "Is the Northwind export fixed") {
		t.Errorf("another seat's turn or this month's was compacted:\n%.3000s", read)
	}

	m, found, err := h.store.month("alan", lastMonth.Format(monthLayout))
	if err != nil || !found || m.Summary != summary || !slices.Equal(m.Turns, []string{"old-export", "old-payroll"}) ||
		m.Condensed != 1 || m.Described != 1 || m.LeftOut != 0 || !strings.HasPrefix(m.Model, auxModel) {
		t.Fatalf("last month's record: %v %v %+v", err, found, m)
	}
	if m, found, _ := h.store.month("alan", monthBefore.Format(monthLayout)); !found || m.Summary != earlier {
		t.Errorf("the month before: %v %+v", found, m)
	}
	if _, found, _ := h.store.month("grace", lastMonth.Format(monthLayout)); found {
		t.Error("grace's month was compacted by alan's turn")
	}
	if rec, _, err := h.store.Turn("old-export"); err != nil || rec.Trigger != longTask {
		t.Errorf("the compacted turn's record: %v %.100q", err, rec.Trigger)
	}

	// Recall finds the month by what its record says, and the turns whole.
	alan := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t9"}
	got := decodeMap[episodesOut](t, surf.client.OK(alan, "query_episodes", map[string]any{"query": "Northwind invoice export timeout paging"}))
	if len(got.Months) == 0 || got.Months[0].Month != lastMonth.Format(monthLayout) || got.Months[0].Summary != summary ||
		!strings.HasPrefix(got.Months[0].CompactedBy, "compacted by "+auxModel) || !strings.Contains(got.Months[0].CompactedBy, " from 2 turns; ") ||
		!strings.Contains(got.Months[0].CompactedBy, "1 long text read condensed; 1 long text no model condensed, read as size and digest") {
		t.Fatalf("query_episodes' months: %+v", got.Months)
	}
	byKey := map[string]episode{}
	for _, e := range got.Episodes {
		byKey[e.Turn] = e
	}
	if e, ok := byKey["old-export"]; !ok || e.Account != "Paged the export 5,000 invoices at a time." {
		t.Errorf("the compacted turn is not recalled: %+v", got.Episodes)
	}
	// A conversation's recall is of its turns only.
	got = decodeMap[episodesOut](t, surf.client.OK(alan, "query_episodes", map[string]any{"query": "Northwind invoice export", "conversation": "old-export"}))
	if len(got.Months) != 0 || len(got.Episodes) != 1 {
		t.Errorf("one conversation's recall: %+v", got)
	}

	// Compacted once: the next turn compacts nothing.
	h.turnFor("alan", "CX-10")
	if n := len(compactions()); n != 2 {
		t.Errorf("%d compaction calls after a second turn, want still 2", n)
	}
}

// decodeMap reads a tool's structured answer, as a test client decoded it
// into a map, back into its type.
func decodeMap[T any](t *testing.T, m map[string]any) T {
	t.Helper()
	var out T
	raw, err := json.Marshal(m)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// OUT-2: a month past what one compaction call reads keeps whole turns
// in it and leaves the newest out whole, counted in the record and its
// label, never a turn cut; a compaction whose call failed keeps no record
// and is done by the seat's next turn.
func TestMonthlyCompactionLeavesOutWholeTurns(t *testing.T) {
	now := time.Now().UTC()
	lastMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0)
	const summary = "You answered sixteen questions about the ledger."
	// The auxiliary model is down for the first turn's compaction only.
	var down atomic.Bool
	down.Store(true)
	turns := bySubject(map[string][]modeltest.Reply{
		"grace GX-1": {comment("GX-1"), done},
		"grace GX-2": {comment("GX-2"), done},
	})
	h, _ := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.System == compactSystem {
			if down.Load() {
				return modeltest.Reply{Status: 500, Message: "the auxiliary model is down"}
			}
			return modeltest.Reply{Text: summary}
		}
		if c.System == condenseSystem {
			return modeltest.Reply{Status: 500, Message: "nothing here is long enough to condense"}
		}
		return turns(c)
	}, map[string]string{"GX-1": "One more ledger question.", "GX-2": "And another."}, nil)

	// Each turn's task and outcome are just under what is read whole.
	text := func(i int, what string) string {
		s := fmt.Sprintf("Ledger question %02d, %s: ", i, what)
		return s + strings.Repeat("x", compactTextBytes-len(s))
	}
	var keys []string
	for i := range 16 {
		key := fmt.Sprintf("ledger-%02d", i)
		keys = append(keys, key)
		endedAt(t, h.store, "grace", key, text(i, "asked"), text(i, "answered"), lastMonth.Add(time.Duration(i+1)*time.Hour))
	}
	month := lastMonth.Format(monthLayout)

	h.turnFor("grace", "GX-1")
	if _, found, _ := h.store.month("grace", month); found {
		t.Fatal("a record was kept though the compaction's call failed")
	}
	down.Store(false)
	h.turnFor("grace", "GX-2")
	m, found, err := h.store.month("grace", month)
	if err != nil || !found || m.Summary != summary || !slices.Equal(m.Turns, keys) || m.LeftOut == 0 || m.LeftOut >= len(keys) {
		t.Fatalf("the month's record: %v %v %+v", err, found, m)
	}
	var asked []string
	for _, c := range h.model.Requests() {
		if c.System == compactSystem {
			asked = append(asked, c.Messages[0].Text)
		}
	}
	if len(asked) < 2 {
		t.Fatalf("%d compaction calls, want the failed one and the next turn's", len(asked))
	}
	read := asked[len(asked)-1]
	kept := len(keys) - m.LeftOut
	if len(read) > compactInputBytes+1024 || !strings.Contains(read, fmt.Sprintf("Compact your %d turns", kept)) ||
		!strings.Contains(read, fmt.Sprintf("Your %d later turns of the month did not fit here", m.LeftOut)) {
		t.Errorf("the compaction read %d bytes:\n%.300s", len(read), read)
	}
	// Whole turns: every kept one's task and outcome entire, no left-out
	// one's opening.
	for i := range keys {
		in := strings.Contains(read, text(i, "asked")) && strings.Contains(read, text(i, "answered"))
		out := !strings.Contains(read, fmt.Sprintf("Ledger question %02d", i))
		if i < kept && !in || i >= kept && !out {
			t.Errorf("turn %d of %d (kept %d): read whole %v, left out %v", i, len(keys), kept, in, out)
		}
	}
	if !strings.Contains(m.compactedBy(), fmt.Sprintf("%d turns, the newest, past what one summary reads", m.LeftOut)) &&
		!strings.Contains(m.compactedBy(), "1 turn, the newest, past what one summary reads") {
		t.Errorf("the label: %s", m.compactedBy())
	}
}

// OUT-2: a hub that was down across a month's end compacts the month as
// the seat's mailbox opens, before any wake.
func TestMonthlyCompactionAtStart(t *testing.T) {
	lastMonth := time.Date(time.Now().Year(), time.Now().Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -3)
	const summary = "You reconciled the bank feed."
	h, _ := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.System == compactSystem {
			return modeltest.Reply{Text: summary}
		}
		return modeltest.Reply{Status: 500, Message: "nothing else is scripted"}
	}, nil, nil)
	endedAt(t, h.store, "alan", "old-bank", "Reconcile the bank feed.", "Reconciled.", lastMonth)
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	node := h.store.Node()
	// A bound on the wait, so a missing compaction fails rather than
	// hangs; it is kept at the first write after the mailbox opens.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		pos := node.Position()
		if m, found, err := h.store.month("alan", lastMonth.Format(monthLayout)); err != nil || found {
			if err != nil || m.Summary != summary || !slices.Equal(m.Turns, []string{"old-bank"}) {
				t.Fatalf("the month's record: %v %+v", err, m)
			}
			return
		}
		if err := node.WaitFor(ctx, pos+1); err != nil {
			t.Fatalf("no record of the month was kept: %v", err)
		}
	}
}
