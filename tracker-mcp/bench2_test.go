package tracker

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCreateWorkItemDirect is the same create without the MCP hop, to
// tell the transport's share from the write path's.
func BenchmarkCreateWorkItemDirect(b *testing.B) {
	h := newHarness(b)
	s := newSrv(Deps{Node: h.node, Directory: testDirectory})
	var seq atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			if _, err := s.createWorkItem(context.Background(), ada, createIn{Title: fmt.Sprintf("Bench item %d", i), Project: "CORE", Assignee: "alan"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}
