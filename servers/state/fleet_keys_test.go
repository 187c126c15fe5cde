package state

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// Issue 39, item 2: a key one node draws is the key every node of the
// fleet reads, and a node given another route secret cannot unseal it.
func TestFleetKeysAreOneKeyAcrossNodes(t *testing.T) {
	ctx, js := testFleetLog(t)
	a, err := js.OpenFleetKeys(ctx, "route-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	b, err := js.OpenFleetKeys(ctx, "route-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	ka, err := a.Key(ctx, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.Key(ctx, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	if len(ka) != 32 || !bytes.Equal(ka, kb) {
		t.Fatalf("two nodes read two keys: %x and %x", ka, kb)
	}
	other, err := b.Key(ctx, "input_rounds")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other, ka) {
		t.Fatal("two names share one key")
	}
	wrong, err := js.OpenFleetKeys(ctx, "another-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Key(ctx, "sessions"); !errors.Is(err, ErrFleetKeyUnreadable) {
		t.Fatalf("a node with another route secret read the key: %v", err)
	}
}

// testFleetLog is a one-node fleet's log for a test, closed after it, and
// a context bounding the test's waits on it.
func testFleetLog(t *testing.T) (context.Context, *JetStreamLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	js, err := OpenJetStream(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Close() })
	return ctx, js
}
