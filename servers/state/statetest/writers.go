package statetest

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// RunWriters runs b.N writes from about callers goroutines at once (the
// concurrency that lets the log group appends) and answers when the timed
// part began. write gets each write's number, from 1; its error fails the
// benchmark.
func RunWriters(b *testing.B, callers int, write func(i int64) error) (start time.Time) {
	b.Helper()
	var seq atomic.Int64
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start = time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := write(seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	return start
}
