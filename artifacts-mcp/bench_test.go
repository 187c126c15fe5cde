package artifacts

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// benchSheet makes an artifact with one collection of rows indexed on
// team and score.
func benchSheet(b *testing.B, h *harness) string {
	id := h.create(ada, "Bench", "{}")
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "rows",
		"columns": []any{map[string]any{"name": "team", "type": "string", "indexed": true}, map[string]any{"name": "score", "type": "number", "indexed": true}, map[string]any{"name": "note", "type": "string"}}}}})
	return id
}

func benchBatch(prefix string, n int) []any {
	list := make([]any, n)
	for j := range n {
		list[j] = map[string]any{"op": "set", "collection": "rows", "doc": fmt.Sprintf("%s-%03d", prefix, j),
			"data": map[string]any{"team": fmt.Sprintf("team-%02d", j%100), "score": float64(j), "note": "a short note about the row"}}
	}
	return list
}

// BenchmarkWriteArtifactData100 writes batches of 100 ops through the tool
// (MCP call, rules, log append fsynced, projection, indexes) from 16
// callers at once, and reports datastore writes (ops) per second.
func BenchmarkWriteArtifactData100(b *testing.B) {
	h := newHarness(b)
	id := benchSheet(b, h)
	var seq atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.OK(ada, "write_artifact_data", map[string]any{"id": id, "ops": benchBatch(fmt.Sprintf("b%d", seq.Add(1)), 100)})
		}
	})
	b.ReportMetric(float64(b.N*100)/time.Since(start).Seconds(), "ops/s")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "batches/s")
}

// BenchmarkQueryArtifactData100k queries a collection of 100,000 rows on
// an indexed column through the tool and reports the median and the 99th
// percentile of one call answering a page of 50.
func BenchmarkQueryArtifactData100k(b *testing.B) {
	h := newHarness(b)
	id := benchSheet(b, h)
	s := newSrv(Deps{Node: h.node, Directory: testDirectory})
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > 1000 {
					return
				}
				var ops []opIn
				for _, o := range benchBatch(fmt.Sprintf("f%04d", i), 100) {
					m := o.(map[string]any)
					ops = append(ops, opIn{Op: "set", Collection: "rows", Doc: m["doc"].(string), Data: m["data"].(map[string]any)})
				}
				if out, err := s.writeArtifactData(context.Background(), ada, writeDataIn{ID: id, Ops: ops}); err != nil || out.Outcome != state.Applied {
					failed.Store(fmt.Sprint(out, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	b.Logf("wrote 100,000 rows in %v", time.Since(start).Round(time.Millisecond))
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"team=eq(1,000 rows)", map[string]any{"id": id, "collection": "rows", "where": []any{map[string]any{"column": "team", "value": "team-42"}}, "limit": 50}},
		{"team=eq,order_by=score", map[string]any{"id": id, "collection": "rows", "where": []any{map[string]any{"column": "team", "value": "team-42"}}, "order_by": "score", "desc": true, "limit": 50}},
		{"score>=95(5,000 rows)", map[string]any{"id": id, "collection": "rows", "where": []any{map[string]any{"column": "score", "op": "gte", "value": 95}}, "limit": 50}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				out := h.OK(ada, "query_artifact_data", tc.args)
				lat = append(lat, time.Since(t0))
				if len(asList(out["rows"])) != 50 {
					b.Fatalf("a page of %d rows", len(asList(out["rows"])))
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkPublish1MiB publishes a 1 MiB inline file through the tool: the
// MCP call, the bytes put in the blob store and read back against their
// digest, the log append fsynced and the projection.
func BenchmarkPublish1MiB(b *testing.B) {
	h := newHarness(b)
	id := h.create(ada, "Big page", "0")
	body := strings.Repeat("<p>a line of the page</p>\n", (1<<20)/26)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := range b.N {
		h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": i + 1, "content": fmt.Sprintf("%08d", i) + body[8:]})
	}
}
