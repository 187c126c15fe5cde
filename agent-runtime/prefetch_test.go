package agent

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/servers"
)

// BLT-1, OUT-1: the turn-start prefetch. A seat's first turn recalls
// nothing; the next one, woken about the same trouble, opens with what it
// kept: the diary note that bears on the ask, whole (a note past 600 bytes
// too), and not the one that shares nothing with it (counted instead);
// the past turn about the same trouble, with what woke it fenced as its
// writer's and what the seat answered; and the skill that fits, its
// newest body whole, the other named. refresh_memory then re-runs the same
// filter by a better query and finds the note the prefetch left out.
func TestTurnStartPrefetch(t *testing.T) {
	restore := "Restoring staging: stop the API first, then load Friday's backup with pg_restore --clean; the restore takes about forty minutes. " +
		strings.Repeat("Check every schema's row counts against the backup's manifest before starting the API again. ", 8)
	freeze := "Deploy freeze until Thursday for the billing release."
	skillBody := "1. Stop the staging API.\n2. pg_restore --clean from the newest backup.\n3. Compare row counts.\n4. Start the API."
	asks := map[string]string{
		"PF-1": "The staging database restore failed overnight; please sort it out and keep notes.",
		"PF-2": "The staging database lost Saturday's data again. Can you restore it?",
	}
	h, _ := newBuiltinHarness(t, bySubject(map[string][]modeltest.Reply{
		"PF-1": {calls(
			modeltest.Call{Name: "reflect_and_persist", Args: map[string]any{"note": restore}},
			modeltest.Call{Name: "reflect_and_persist", Args: map[string]any{"note": freeze, "kind": "short"}},
		), comment("PF-1"), {Text: "Restored staging from Friday's backup and wrote the steps down."}},
		"PF-2": {call("refresh_memory", map[string]any{"query": "when is the billing release?"}), comment("PF-2"), done},
	}), asks, nil)

	h.turnFor("alan", "PF-1")
	// The skills the seat kept from its turns.
	keepSkill(t, h.store, "alan", "staging-restore", skillBody)
	keepSkill(t, h.store, "alan", "release-notes", "1. Tag.\n2. Collect.")
	opening := func(subject string) string {
		for _, c := range h.model.Requests() {
			if wokenAbout(c, "alan", subject) {
				return c.Messages[0].Text
			}
		}
		t.Fatalf("no turn about %s", subject)
		return ""
	}
	if first := opening("PF-1"); strings.Contains(first, "## ") {
		t.Fatalf("a seat with nothing kept recalled something:\n%s", first)
	}

	h.turnFor("alan", "PF-2")
	got := opening("PF-2")
	memory, rest, _ := strings.Cut(got, "## Similar prior work")
	prior, skills, _ := strings.Cut(rest, "## Your skills")
	if !strings.Contains(memory, "## Personal memory") || !strings.Contains(memory, restore) || strings.Contains(got, freeze) ||
		!strings.Contains(memory, "1 more notes share nothing") {
		t.Errorf("personal memory:\n%s", memory)
	}
	if !strings.Contains(prior, servers.FenceOpen) || !strings.Contains(prior, asks["PF-1"]) ||
		!strings.Contains(prior, "What you answered: Restored staging from Friday's backup and wrote the steps down.") {
		t.Errorf("similar prior work:\n%s", prior)
	}
	if !strings.Contains(skills, "### staging-restore (version 1)\n"+skillBody) || !strings.Contains(skills, "Your other skills, which share no words with what woke you: release-notes.") {
		t.Errorf("skills:\n%s", skills)
	}
	// What woke the seat comes first, the recall beneath it.
	if !strings.HasPrefix(got, "@ada") || strings.Index(got, asks["PF-2"]) > strings.Index(got, "## Personal memory") {
		t.Errorf("opening:\n%s", got)
	}
	refreshed := decode[refreshOut](t, results(t, h.model, "alan", "PF-2", 0)[0])
	if len(refreshed.Notes) != 1 || refreshed.Notes[0].Note != freeze {
		t.Errorf("refresh_memory by a better query: %+v", refreshed)
	}
}
