package state_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// These tests break the log on purpose, with the state test kit's one
// fault-injecting log; they live outside package state because that kit
// imports it.

// openFaulty opens a node over a FaultLog with the test projector.
func openFaulty(t testing.TB) (*state.Node, *statetest.FaultLog) {
	return statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: []state.Projector{state.Notes{}}})
}

// WR-2: an acknowledgement lost after the append landed answers unknown
// without a position; the same call again answers applied, and the
// operation had one effect and one ledger row.
func TestLostAcknowledgement(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stripIDs bool // past JetStream's duplicate window: only the ledger dedupes
		// entries: the first append, plus (without the log's dedupe) the
		// duplicate another node appends below.
		entries uint64
	}{
		{"within the log's duplicate window", false, 1},
		{"past the log's duplicate window", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, f := openFaulty(t)
			f.Set(func(f *statetest.Faults) { f.DropAcks, f.StripIDs = 1, tc.stripIDs })
			op := state.NoteOp("write_note", state.NotePayload{Key: "lost", Value: "v"})
			op.ID = state.NewOpID(op.Tool, op.Args)

			a, err := n.Write(context.Background(), op)
			state.AsUnknown(t, err, op.ID, false)
			if a.Outcome != state.Unknown || a.Position != 0 || a.Result != nil || a.OpID != op.ID {
				t.Fatalf("answer %+v, want unknown with no position", a)
			}
			// The entry did land: once this node has projected it, the
			// repeat is answered from the ledger and appends nothing.
			last, err := f.Log.Last(context.Background())
			if err != nil || last != 1 {
				t.Fatalf("log last %d, %v; the dropped append should have landed at 1", last, err)
			}
			if err := n.WaitFor(context.Background(), last); err != nil {
				t.Fatal(err)
			}

			again, err := n.Write(context.Background(), op)
			if err != nil || again.Outcome != state.Applied || again.Position != 1 {
				t.Fatalf("repeat answered %+v, %v", again, err)
			}
			if _, writes, _ := state.ReadNote(t, n, "lost"); writes != 1 {
				t.Fatalf("%d effects, want 1", writes)
			}
			if rows := state.LedgerRows(t, n); rows != 1 {
				t.Fatalf("%d ledger rows, want 1", rows)
			}
			if tc.stripIDs {
				// Another node retries the same operation without this
				// node's ledger to ask, after the log forgot the op_id: the
				// entry lands a second time and the projection passes over
				// it.
				op.At = time.Now()
				data, err := state.EncodeRecord(op)
				if err != nil {
					t.Fatal(err)
				}
				pos, err := f.Log.Append(context.Background(), []state.Message{{Data: data}})
				if err != nil || pos[0] < 2 {
					t.Fatalf("duplicate entry: %v %v", pos, err)
				}
				if err := n.WaitFor(context.Background(), pos[0]); err != nil {
					t.Fatal(err)
				}
				if _, writes, _ := state.ReadNote(t, n, "lost"); writes != 1 {
					t.Fatalf("%d effects after the duplicate entry, want 1", writes)
				}
				if got, ok := n.Vouches(op.ID); !ok || got.Position != 1 || state.LedgerRows(t, n) != 1 {
					t.Fatalf("ledger after the duplicate entry: %+v %v", got, ok)
				}
			}
			if got := state.LogMsgs(t, n); got != tc.entries {
				t.Fatalf("log holds %d entries, want %d", got, tc.entries)
			}
		})
	}
}

// A refused append writes nothing and says so; an append whose fate is
// unknown (even one that did not land) is answered unknown and a repeat
// lands once.
func TestRefusedAppend(t *testing.T) {
	n, f := openFaulty(t)
	f.Set(func(f *statetest.Faults) { f.Refuse = true })
	a, err := n.Write(context.Background(), state.NoteOp("write_note", state.NotePayload{Key: "r", Value: "v"}))
	r := state.AsRefusal(t, err, authority.Unavailable)
	state.MustContain(t, r.Sentence, "Nothing was written", string(a.OpID))
	if a.Outcome == state.Applied || a.Outcome == state.Pending || a.Position != 0 {
		t.Fatalf("answer %+v", a)
	}
	if _, _, found := state.ReadNote(t, n, "r"); found || state.LogMsgs(t, n) != 0 || state.LedgerRows(t, n) != 0 {
		t.Fatal("a refused append left something behind")
	}

	// The log itself closed underneath the node: appends are refused.
	f.Set(func(f *statetest.Faults) { f.Refuse = false })
	if err := f.Log.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = n.Write(context.Background(), state.NoteOp("write_note", state.NotePayload{Key: "r2", Value: "v"}))
	state.AsRefusal(t, err, authority.Unavailable)
	if _, _, found := state.ReadNote(t, n, "r2"); found {
		t.Fatal("applied after the log closed")
	}
}

// TRK-2: a blob the projection frees is erased where it is stored — its
// bytes are nowhere under the data directory — while blobs still held stay
// readable and are checked against their digest.
func TestFreedBlobIsErased(t *testing.T) {
	dir := t.TempDir()
	n := state.OpenNode(t, dir)
	ctx := context.Background()
	marker := []byte("PLANTED-blob-marker-6f1c2a")
	gone := append(bytes.Repeat([]byte("x"), 300<<10), marker...) // several chunks
	kept := []byte("kept bytes, still referred to")
	goneDigest, err := n.PutBlob(ctx, "blob-gone", gone)
	if err != nil {
		t.Fatal(err)
	}
	keptDigest, err := n.PutBlob(ctx, "blob-kept", kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range []state.NotePayload{{Key: "a", Value: "v", Hold: "blob-gone"}, {Key: "b", Value: "v", Hold: "blob-kept"}} {
		if _, err := n.Write(ctx, state.NoteOp("write_note", pl)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := n.Blob(ctx, "blob-gone", goneDigest); err != nil || !bytes.Equal(got, gone) {
		t.Fatalf("Blob before the free: %d bytes, %v", len(got), err)
	}
	if hits := statetest.Grep(t, dir, string(marker)); len(hits) == 0 {
		t.Fatal("the marker is not under the data directory before the free; the test proves nothing")
	}
	if _, err := n.Write(ctx, state.NoteOp("write_note", state.NotePayload{Key: "a", Value: "w", Free: "blob-gone"})); err != nil {
		t.Fatal(err)
	}
	if err := n.EraseFreed(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := statetest.Grep(t, dir, string(marker)); len(hits) != 0 {
		t.Fatalf("a freed blob's bytes are still under the data directory: %v", hits)
	}
	if _, err := n.Blob(ctx, "blob-gone", goneDigest); err == nil {
		t.Fatal("a freed blob still reads")
	}
	if got, err := n.Blob(ctx, "blob-kept", keptDigest); err != nil || !bytes.Equal(got, kept) {
		t.Fatalf("the held blob: %q, %v", got, err)
	}
	if _, err := n.Blob(ctx, "blob-kept", state.Digest([]byte("other"))); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a blob read against the wrong digest: %v", err)
	}
}

// A free the node did not get to erase (it stopped first) is erased when
// the node opens again; a blob nothing refers to is erased once it is
// older than the grace, and not before.
func TestBlobsLeftBehindAreErasedOnOpen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	marker := []byte("PLANTED-freed-before-stop")
	orphanMarker := []byte("PLANTED-orphan-never-written")
	n := state.OpenNode(t, dir)
	if _, err := n.PutBlob(ctx, "freed", marker); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PutBlob(ctx, "orphan", orphanMarker); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Write(ctx, state.NoteOp("write_note", state.NotePayload{Key: "a", Value: "v", Hold: "freed"})); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Write(ctx, state.NoteOp("write_note", state.NotePayload{Key: "a", Value: "w", Free: "freed"})); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(statetest.Grep(t, dir, string(marker))) == 0 || len(statetest.Grep(t, dir, string(orphanMarker))) == 0 {
		t.Fatal("the blobs are not on disk after the stop; the test proves nothing")
	}
	// A grace longer than the test: the orphan is young, so it stays.
	n = state.OpenNode(t, dir, func(o *state.Options) { o.BlobGrace = time.Hour })
	waitFor(t, "the freed blob erased", func() bool { return len(statetest.Grep(t, dir, string(marker))) == 0 })
	if len(statetest.Grep(t, dir, string(orphanMarker))) == 0 {
		t.Fatal("a young orphan was erased: an upload whose operation is still on its way would lose its bytes")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// A grace already past: the orphan goes.
	state.OpenNode(t, dir, func(o *state.Options) { o.BlobGrace = time.Nanosecond })
	waitFor(t, "the orphan erased", func() bool { return len(statetest.Grep(t, dir, string(orphanMarker))) == 0 })
}

// waitFor polls cond until it holds or thirty seconds pass (a loaded
// machine): the node's blob keeper runs on its own goroutine, and nothing
// else signals its progress.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A follower whose reading of the log fails resumes from the last position
// it applied: the write it was reading lands, and is answered applied.
func TestFollowerResumesAfterALostDelivery(t *testing.T) {
	n, log := openFaulty(t)
	log.Set(func(f *statetest.Faults) { f.BreakFollow = 1 })
	a, err := n.Write(context.Background(), state.NoteOp("write_note", state.NotePayload{Key: "k", Value: "v"}))
	if err != nil || a.Outcome != state.Applied {
		t.Fatalf("answer %+v %v; want applied once the follower resumed", a, err)
	}
}
