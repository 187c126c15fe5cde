package state

import (
	"context"
	"testing"
)

// Progress reads the log's end and the projection's position: after a
// write the two meet, and a closed node answers a refusal, not a stale
// pair of numbers.
func TestProgressFollowsWrites(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	logged, projected, err := n.Progress(ctx)
	if err != nil || logged != projected {
		t.Fatalf("fresh node: logged %d projected %d err %v", logged, projected, err)
	}
	before := logged
	if _, err := n.Write(ctx, noteOp("write_note", notePayload{Key: "k", Value: "v"})); err != nil {
		t.Fatal(err)
	}
	logged, projected, err = n.Progress(ctx)
	if err != nil || logged <= before || projected != logged {
		t.Fatalf("after a write: logged %d (was %d) projected %d err %v", logged, before, projected, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Progress(ctx); err == nil {
		t.Fatal("a closed node answered its progress")
	}
}
