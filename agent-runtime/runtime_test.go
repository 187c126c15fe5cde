package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// memFeed is a wake feed held in memory; add appends a row and writes an
// operation so the runtime's follower sees the log move.
type memFeed struct {
	mu   sync.Mutex
	rows []servers.Wake
}

func (f *memFeed) read(after string, limit int) ([]servers.Wake, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []servers.Wake
	for _, w := range f.rows {
		if w.Cursor > after && len(out) < limit {
			out = append(out, w)
		}
	}
	return out, nil
}

func (f *memFeed) add(t *testing.T, store *Store, w servers.Wake) string {
	f.mu.Lock()
	w.Cursor = fmt.Sprintf("%016x/0001", len(f.rows)+1)
	f.rows = append(f.rows, w)
	f.mu.Unlock()
	nudge(t, store)
	return turnKeyFor("mem", w.Cursor)
}

// nudge writes an operation, as a server leaving a wake row does.
func nudge(t *testing.T, store *Store) {
	t.Helper()
	c := authority.Caller{Seat: "token:test", Kind: authority.KindOperator}
	if _, err := store.write(t.Context(), c, "nudge", time.Now(), kindOrigin, time.Now().UnixNano(), map[string]string{}); err != nil {
		t.Fatal(err)
	}
}

func waitEnded(t *testing.T, store *Store, key string) TurnRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rec, err := store.waitEnded(ctx, key)
	if err != nil {
		t.Fatalf("turn %s did not end: %v", key, err)
	}
	return rec
}

// TRK-4, CFG-6: started, the runtime claims every agent seat (the hub
// starts their children), and a seat's mailbox runs a turn for each wake
// naming it, in order; a wake by the seat itself starts nothing, and
// history before the runtime first ran wakes nobody. Release lets the
// seat go; Close is safe twice.
func TestMailbox(t *testing.T) {
	h := newHarness(t, modeltest.Steps(call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "x"}), done), []Tool{commentTool}, nil)
	feed := &memFeed{}
	old := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-0", By: "ada", At: time.Now()})
	h.rt.opts.Feeds = []Feed{FeedOf("mem", feed.read, h.feed.Trigger)}
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.hub.mu.Lock()
	claimed := h.hub.claimed["alan"] == 1 && h.hub.claimed["grace"] == 1 && h.hub.claimed["bob"] == 1 && h.hub.claimed["ada"] == 0
	h.hub.mu.Unlock()
	if !claimed {
		t.Fatalf("claimed %v", h.hub.claimed)
	}
	self := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "alan", At: time.Now()})
	first := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()})
	second := feed.add(t, h.store, servers.Wake{Seat: "grace", Subject: "CORE-2", By: "ada", At: time.Now()})
	for _, key := range []string{first, second} {
		if rec := waitEnded(t, h.store, key); rec.Outcome != Delivered {
			t.Fatalf("turn %s: %+v", key, rec)
		}
	}
	for _, key := range []string{old, self} {
		if _, found, _ := h.store.Turn(key); found {
			t.Fatalf("a turn ran for %s", key)
		}
	}
	if err := h.rt.Release(t.Context(), "alan"); err != nil {
		t.Fatal(err)
	}
	if got := h.rt.Held(); len(got) != 2 {
		t.Fatalf("held after release: %v", got)
	}
	_ = h.rt.Close()
	_ = h.rt.Close()
}

// A turn left running (its node killed mid-turn) runs again when its seat
// is claimed, with the same turn key, before any new wake.
func TestRunningTurnRunsAgain(t *testing.T) {
	h := newHarness(t, modeltest.Steps(call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "x"}), done), []Tool{commentTool}, nil)
	w := servers.Wake{Cursor: "0000000000000009/0001", Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()}
	rec, err := h.rt.begin(t.Context(), h.feed, w)
	if err != nil {
		t.Fatal(err)
	}
	if running, _ := h.store.Running("alan"); len(running) != 1 || running[0].Key != rec.Key {
		t.Fatalf("running %+v", running)
	}
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := waitEnded(t, h.store, rec.Key)
	if got.Outcome != Delivered {
		t.Fatalf("re-run %+v", got)
	}
	h.hub.surface.mu.Lock()
	calls := h.hub.surface.calls
	h.hub.surface.mu.Unlock()
	if len(calls) != 1 || calls[0].Caller.TurnKey != rec.Key {
		t.Fatalf("the re-run's calls %+v", calls)
	}
}

// waitHeld waits until the runtime's open mailboxes are want.
func waitHeld(t *testing.T, rt *Runtime, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(rt.Held(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("mailboxes open %v, want %v", rt.Held(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FLT-1: placed by another owner (a fleet's leases), the runtime claims
// no seat itself and runs exactly the seats it is told: a seat named has
// its mailbox opened and its wakes run; a seat no longer named has its
// mailbox closed, and a wake for it waits, unrun here, until it is named
// again. The hub is asked for nothing: its lease loop already decided.
func TestPlacedRuntimeRunsOnlyTheSeatsItIsTold(t *testing.T) {
	h := newHarness(t, modeltest.Steps(call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "x"}), done), []Tool{commentTool},
		func(o *Options) { o.Placed = true })
	feed := &memFeed{}
	h.rt.opts.Feeds = []Feed{FeedOf("mem", feed.read, h.feed.Trigger)}
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := h.rt.Held(); len(got) != 0 {
		t.Fatalf("open before any placement: %v", got)
	}

	h.rt.Place([]string{"alan", "grace"})
	waitHeld(t, h.rt, "alan", "grace")
	first := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()})
	if rec := waitEnded(t, h.store, first); rec.Outcome != Delivered {
		t.Fatalf("turn %s: %+v", first, rec)
	}

	// alan's lease is lost: its mailbox closes; grace's stays.
	h.rt.Place([]string{"grace"})
	waitHeld(t, h.rt, "grace")
	lost := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()})
	other := feed.add(t, h.store, servers.Wake{Seat: "grace", Subject: "CORE-2", By: "ada", At: time.Now()})
	if rec := waitEnded(t, h.store, other); rec.Outcome != Delivered {
		t.Fatalf("turn %s: %+v", other, rec)
	}
	if rec, found, _ := h.store.Turn(lost); found {
		t.Fatalf("a seat this node was told it does not run ran a turn: %+v", rec)
	}

	// alan comes back (this node gained it again): the wake it missed runs.
	h.rt.Place([]string{"alan", "grace"})
	if rec := waitEnded(t, h.store, lost); rec.Outcome != Delivered {
		t.Fatalf("turn %s: %+v", lost, rec)
	}
	h.hub.mu.Lock()
	asked := len(h.hub.claimed)
	h.hub.mu.Unlock()
	if asked != 0 {
		t.Fatalf("a placed runtime claimed or released seats itself: %v", h.hub.claimed)
	}
}
