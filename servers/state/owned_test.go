package state

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Keep commits the node's own rows beside the projection, refuses the
// reserved space, and is refused once the node closes; PositionOf reads
// the position a snapshot is at.
func TestKeepAndPositionOf(t *testing.T) {
	n := openNode(t, t.TempDir())
	a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k", Value: "v"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Keep(func(b *pebble.Batch) error { return b.Set([]byte("\x01test/own"), []byte("x"), nil) }); err != nil {
		t.Fatal(err)
	}
	err = n.View(func(r pebble.Reader) error {
		pos, err := PositionOf(r)
		if err != nil || pos != a.Position {
			t.Fatalf("PositionOf: %d %v, the write landed at %d", pos, err, a.Position)
		}
		v, closer, err := r.Get([]byte("\x01test/own"))
		if err != nil || string(v) != "x" {
			t.Fatalf("the kept row: %q %v", v, err)
		}
		return closer.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Keep(func(b *pebble.Batch) error { return b.Set([]byte("\x00state/position"), []byte("nope"), nil) }); err == nil {
		t.Fatal("Keep wrote into the reserved space")
	}
	if pos, _, _ := readU64(n.db, keyPosition); pos != a.Position {
		t.Fatalf("the position row changed: %d", pos)
	}
	boom := errors.New("boom")
	if err := n.Keep(func(b *pebble.Batch) error { _ = b.Set([]byte("\x01test/half"), nil, nil); return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
	if _, closer, err := n.db.Get([]byte("\x01test/half")); err == nil {
		closer.Close()
		t.Fatal("a failed Keep committed its writes")
	}
	n.Close()
	if err := n.Keep(func(*pebble.Batch) error { return nil }); err == nil {
		t.Fatal("Keep after Close answered nil")
	}
}
