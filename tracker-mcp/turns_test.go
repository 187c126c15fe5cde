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
