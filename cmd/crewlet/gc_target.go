package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The hub's garbage collection target. A hub with a few sessions holds a
// small heap and allocates with every request: letting garbage grow to four
// times the live heap before collecting (GOGC 400) costs a little memory and
// saves much collection. A hub with ten thousand sessions holds hundreds of
// MiB, and four times that is gigabytes of garbage between collections, with
// the runtime's bookkeeping for a heap that size kept after it is freed. So
// the target follows the live heap: 400 while it is small, lowered as it
// grows so that the room left for garbage stays near gcRoom, never below Go's
// own default of 100. GOGC, when set, wins (serve.go).
const (
	gcPercentSmall = 400
	gcPercentFloor = 100
	gcRoom         = 256 << 20
	// gcFollowEvery is how often the live heap is looked at: a new
	// figure exists only after a collection.
	gcFollowEvery = 500 * time.Millisecond
)

// gcPercent is the target for a live heap of live bytes, as Go counts it
// for the target: the heap marked live, the stacks and globals scanned.
func gcPercent(live uint64) int {
	if live == 0 {
		return gcPercentSmall
	}
	return int(min(max(gcRoom*100/live, gcPercentFloor), gcPercentSmall))
}

// gcReading is what the runtime said at the end of its last collection.
type gcReading struct {
	cycles uint64 // collections so far
	live   uint64 // bytes the target is a percentage of
}

// readGC reads the runtime's last collection.
func readGC() gcReading {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
	metrics.Read(s)
	var r gcReading
	if s[0].Value.Kind() == metrics.KindUint64 {
		r.cycles = s[0].Value.Uint64()
	}
	for _, v := range s[1:] {
		if v.Value.Kind() == metrics.KindUint64 {
			r.live += v.Value.Uint64()
		}
	}
	return r
}

// followGC sets the target from each collection's live heap, read at
// every tick, until ctx ends.
func followGC(ctx context.Context, ticks <-chan time.Time, read func() gcReading, set func(int)) {
	last := read()
	set(gcPercent(last.live))
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if r := read(); r.cycles != last.cycles {
			last = r
			set(gcPercent(r.live))
		}
	}
}

// startGCTarget follows the live heap until the returned stop is called;
// stop returns once the follower has.
func startGCTarget() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	tick := time.NewTicker(gcFollowEvery)
	done := make(chan struct{})
	go func() {
		defer close(done)
		followGC(ctx, tick.C, readGC, func(p int) { debug.SetGCPercent(p) })
	}()
	return func() {
		cancel()
		<-done
		tick.Stop()
	}
}
