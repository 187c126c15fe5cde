package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The GC target follows the live heap (issue 37: ten thousand idle
// sessions hold hundreds of MiB, and 400% of that was gigabytes).
func TestGCPercentFollowsTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},          // nothing read yet
		{8 * mib, 400},    // a hub with a few sessions
		{64 * mib, 400},   // the room is 256 MiB: exactly 400%
		{65 * mib, 393},   // past it the target falls
		{128 * mib, 200},  //
		{256 * mib, 100},  // the floor, Go's default
		{2048 * mib, 100}, // never below it
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// The follower sets the target at once, again only after a collection,
// and returns when its context ends.
func TestFollowGCSetsTheTargetAfterEachCollection(t *testing.T) {
	var mu sync.Mutex
	reading := gcReading{cycles: 1, live: 8 << 20}
	var set []int
	read := func() gcReading { mu.Lock(); defer mu.Unlock(); return reading }
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followGC(ctx, ticks, read, func(p int) { mu.Lock(); set = append(set, p); mu.Unlock() })
	}()
	ticks <- time.Time{} // the follower is past its first setting
	mu.Lock()
	reading.live = 512 << 20 // the same collection, read again: no new figure
	mu.Unlock()
	ticks <- time.Time{}
	mu.Lock()
	reading = gcReading{cycles: 2, live: 128 << 20}
	mu.Unlock()
	ticks <- time.Time{}
	ticks <- time.Time{} // the third tick's setting is made before this one is taken
	cancel()
	<-done
	if want := []int{400, 200}; len(set) != len(want) || set[0] != want[0] || set[1] != want[1] {
		t.Fatalf("targets set %v, want %v", set, want)
	}
}

// The real reading: a live heap held across a collection is counted.
func TestReadGCCountsTheLiveHeap(t *testing.T) {
	runtime.GC()
	before := readGC()
	held := make([]byte, 64<<20)
	runtime.GC()
	after := readGC()
	runtime.KeepAlive(held)
	if after.cycles <= before.cycles {
		t.Fatalf("cycles %d then %d", before.cycles, after.cycles)
	}
	if after.live < before.live+48<<20 { // room for what the process freed meanwhile
		t.Fatalf("live %d then %d with 64 MiB more held", before.live, after.live)
	}
}

// startGCTarget sets the target, and its stop ends its follower.
func TestStartGCTargetStops(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	before := goleak.IgnoreCurrent()
	stop := startGCTarget()
	stop()
	goleak.VerifyNone(t, before)
	if got := debug.SetGCPercent(100); got != gcPercent(readGC().live) {
		t.Fatalf("target %d after start, want %d", got, gcPercent(readGC().live))
	}
}
