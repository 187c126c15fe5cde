package state

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDurableWrites measures creates through the whole path — append
// fsynced by the log (SyncAlways), projection, ledger — from many writers
// at once, as a busy company's seats would make them.
func BenchmarkDurableWrites(b *testing.B) {
	for _, writers := range []int{2, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			n := openNode(b, b.TempDir())
			var seq atomic.Int64
			// RunParallel starts parallelism × GOMAXPROCS goroutines.
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					a, err := n.Write(context.Background(), noteOp("create_note", notePayload{Key: fmt.Sprintf("k%d", i), Value: "a new note with a short body"}))
					if err != nil || a.Outcome != Applied {
						b.Errorf("write: %+v %v", a, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
		})
	}
}
