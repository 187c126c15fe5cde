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

// BenchmarkDurableWritesFleet is BenchmarkDurableWrites on a fleet of three
// nodes in this process, the log replicated on all three (R3): the writers
// spread over the nodes, each write answered applied once its own node's
// projection has it. Beside the single node's figure it is what a fleet
// costs a write: a replicated, fsynced quorum before the acknowledgement.
//
//	go test ./servers/state -run '^$' -bench 'DurableWrites' -benchtime 2000x
func BenchmarkDurableWritesFleet(b *testing.B) {
	nodes := startFleet(b, 3, nil)
	for _, writers := range []int{2, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			var seq atomic.Int64
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					n := nodes[i%3].node
					a, err := n.Write(context.Background(), noteOp("create_note", notePayload{Key: fmt.Sprintf("w%d-k%d", writers, i), Value: "a new note with a short body"}))
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
