package tracker

import (
	"context"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// WR-1: a write durable in the log but not yet on this node's projection
// answers pending with its position, and the item shows up once the
// projection catches up.
func TestPendingOutcome(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	node, err := state.Open(ctx, state.Options{Dir: dir, Projectors: Projectors(), ProjectionWait: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	h := &harness{t: t, node: node}
	h.connect(Deps{Node: node, Directory: testDirectory})
	pending := 0
	for i := range 5 {
		out := h.ok(turnOf(alan, "p"+string(rune('a'+i))), "create_work_item", map[string]any{"title": "Maybe slow"})
		switch out["outcome"] {
		case "pending":
			pending++
			if num(out["position"]) == 0 || out["key"] == nil || out["note"] == nil {
				t.Fatalf("pending answer %v", out)
			}
			if _, ok := out["version"]; ok {
				t.Fatalf("pending answered a version: %v", out)
			}
			if err := node.WaitFor(ctx, uint64(num(out["position"]))); err != nil {
				t.Fatal(err)
			}
			got := h.ok(alan, "get_work_item", map[string]any{"key": out["key"]})
			if got["item"].(map[string]any)["title"] != "Maybe slow" {
				t.Fatalf("after catching up: %v", got)
			}
		case "applied":
		default:
			t.Fatalf("outcome %v", out)
		}
	}
	t.Logf("%d of 5 creates answered pending", pending)
}
