package tracker

import (
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// OUT-3: a turn's end noted on its item carries at most 64 KiB of the
// reason, head kept and the cut said, whatever the caller passes: the
// reason quotes whatever failed, and the note is an entry of the log.
func TestTurnEndedNoteClipsItsReason(t *testing.T) {
	h := newHarness(t)
	key := h.ok(ada, "create_work_item", map[string]any{"title": "Nobody answers"})["key"].(string)
	reason := "The model endpoint failed: " + strings.Repeat("detail ", 100<<10)
	if err := NoteTurnEnded(t.Context(), h.node, turnOf(alan, "turn-clip"), time.Now(), key, "failed", reason); err != nil {
		t.Fatal(err)
	}
	var row map[string]any
	for _, a := range h.ok(ada, "list_activity", map[string]any{"item": key})["activity"].([]any) {
		if a := a.(map[string]any); a["action"] == "turn_failed" {
			row = a
		}
	}
	if row == nil {
		t.Fatal("the item's activity says nothing of the failed turn")
	}
	sum := row["summary"].(string)
	if len(sum) > state.DiagnosticBytes+200 || !strings.Contains(sum, ": The model endpoint failed: detail") || !strings.HasSuffix(sum, "more bytes of this error left out]") {
		t.Fatalf("%d bytes of summary ending %q", len(sum), sum[max(0, len(sum)-80):])
	}
}

// Issue 40: a turn that ended without answering is on the item itself, as
// get_work_item shows it (seat, outcome and why), where the person who
// woke the seat looks for its answer; noting it is no edit, so the item's
// version, which a writer's if_match names, stays.
func TestFailedTurnShowsOnTheItem(t *testing.T) {
	h := newHarness(t)
	key := h.ok(ada, "create_work_item", map[string]any{"title": "Nobody answers"})["key"].(string)
	item := func() map[string]any {
		return h.ok(ada, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)
	}
	before := item()
	if before["last_failed_turn"] != nil {
		t.Fatalf("a new item shows a failed turn: %v", before["last_failed_turn"])
	}
	if err := NoteTurnEnded(t.Context(), h.node, turnOf(alan, "turn-1"), time.Now(), key, "failed", "The model endpoint failed: connection refused"); err != nil {
		t.Fatal(err)
	}
	after := item()
	got, _ := after["last_failed_turn"].(map[string]any)
	if got["seat"] != alan.Seat || got["turn"] != "turn-1" || got["outcome"] != "failed" || got["reason"] != "The model endpoint failed: connection refused" {
		t.Fatalf("get_work_item's last_failed_turn: %v", after["last_failed_turn"])
	}
	if after["version"] != before["version"] {
		t.Errorf("noting a turn's end moved the item's version from %v to %v", before["version"], after["version"])
	}
}
