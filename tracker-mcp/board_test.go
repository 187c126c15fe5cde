package tracker

import (
	"fmt"
	"testing"

	"github.com/crewlet/hub/authority"
)

func columnOf(out map[string]any) string { return fmt.Sprint(out["column"]) }

// OPS-3: the board drag moves a card within its column and across
// columns, and answers the column as the board now shows it; the change
// is in the item's history under who made it and through which
// credential (OPS-4).
func TestMoveOnBoard(t *testing.T) {
	h := newHarness(t)
	var keys []string
	for _, title := range []string{"A", "B", "C"} {
		keys = append(keys, h.ok(ada, "create_work_item", map[string]any{"title": title})["key"].(string))
	}
	a, b, c := keys[0], keys[1], keys[2]
	out := h.ok(ada, "move_on_board", map[string]any{"key": c, "before": a})
	if got, want := columnOf(out), fmt.Sprint([]string{c, a, b}); got != want {
		t.Fatalf("column %s, want %s", got, want)
	}
	out = h.ok(ciBot, "move_on_board", map[string]any{"key": c, "after": a})
	if got, want := columnOf(out), fmt.Sprint([]string{a, c, b}); got != want {
		t.Fatalf("column %s, want %s", got, want)
	}
	out = h.ok(grace, "move_on_board", map[string]any{"key": b, "status": "in_progress"})
	if out["status"] != "in_progress" || columnOf(out) != fmt.Sprint([]string{b}) {
		t.Fatalf("across columns: %v", out)
	}
	out = h.ok(ada, "move_on_board", map[string]any{"key": a, "status": "in_progress", "before": b})
	if columnOf(out) != fmt.Sprint([]string{a, b}) {
		t.Fatalf("across and within: %v", out)
	}
	item := h.ok(ada, "get_work_item", map[string]any{"key": b})["item"].(map[string]any)
	hist := item["history"].([]any)
	moved := hist[len(hist)-2].(map[string]any)
	if moved["field"] != "status" || moved["by"] != "grace" || moved["operator_id"] != "phone" {
		t.Fatalf("history: %v", hist)
	}
	act := h.ok(ada, "list_activity", map[string]any{"item": b})["activity"].([]any)[0].(map[string]any)
	if act["action"] != "moved_on_board" || act["actor"] != "grace" || act["operator_id"] != "phone" {
		t.Fatalf("activity: %v", act)
	}
}

// Each refusal the board drag can answer, and who it refuses.
func TestMoveOnBoardRefusals(t *testing.T) {
	h := newHarness(t)
	a := h.ok(ada, "create_work_item", map[string]any{"title": "A"})["key"].(string)
	b := h.ok(ada, "create_work_item", map[string]any{"title": "B", "status": "in_progress"})["key"].(string)
	h.refused(alan, "move_on_board", map[string]any{"key": a, "status": "done"}, authority.Forbidden)
	h.refused(ada, "move_on_board", map[string]any{"key": "CORE-99", "status": "done"}, authority.NotFound)
	h.refused(ada, "move_on_board", map[string]any{"key": a, "status": "done", "if_match": 7}, authority.StaleVersion)
	for name, args := range map[string]map[string]any{
		"no such column":   {"key": a, "status": "parked"},
		"nothing moves":    {"key": a},
		"before and after": {"key": a, "before": b, "after": b},
		"another column":   {"key": a, "before": b},
		"no card":          {"key": a, "after": "CORE-99"},
		"an empty column":  {"key": a, "status": "done", "before": b},
		"the card itself":  {"key": b, "before": b},
	} {
		t.Run(name, func(t *testing.T) { h.refused(ada, "move_on_board", args, authority.Invalid) })
	}
}
