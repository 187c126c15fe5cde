package tracker

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// fill files n items straight through the node (the same operations the
// tool writes, without the MCP round trip), from many writers at once.
func fill(b *testing.B, h *harness, n int) {
	b.Helper()
	statuses := []string{"todo", "in_progress", "in_review", "done", "cancelled"}
	assignees := []string{"ada", "alan", "linus", "grace"}
	for _, d := range []projectDecl{{Key: "CORE", Name: "Core", Unit: "core", Lead: "ada"}, {Key: "OPS", Name: "Operations", Unit: "ops", Lead: "grace"}} {
		op := state.Op{Tool: "write_project", Args: mustJSON(d), Kind: kindProject, Payload: mustJSON(projectPayload{Project: d, AddLabels: []string{"flaky"}}),
			Caller: authority.Caller{Seat: "ada", Kind: authority.KindHuman}}
		if _, err := h.node.Write(context.Background(), op); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				proj := projectDecl{Key: "CORE", Name: "Core", Unit: "core", Lead: "ada"}
				if i%2 == 0 {
					proj = projectDecl{Key: "OPS", Name: "Operations", Unit: "ops", Lead: "grace"}
				}
				pl := createPayload{Project: proj, Title: fmt.Sprintf("Item %d: investigate the flaky build", i),
					Description: fmt.Sprintf("Steps, logs and what was tried on the %s %s.", benchNouns[i%len(benchNouns)], benchNouns[(i/7)%len(benchNouns)]),
					Status:      statuses[i%len(statuses)],
					Assignee:    assignees[i%len(assignees)], Via: "argument"}
				if i%10 == 0 {
					pl.Labels = []string{"flaky"}
				}
				op := state.Op{Tool: "create_work_item", Args: []byte(fmt.Sprintf(`{"i":%d}`, i)), Kind: kindCreate,
					Payload: mustJSON(pl), Caller: authority.Caller{Seat: "alan", Kind: authority.KindAgent}}
				if a, err := h.node.Write(context.Background(), op); err != nil || a.Outcome != state.Applied {
					failed.Store(fmt.Sprintf("%+v %v", a, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatalf("fill: %v", f)
	}
}

// benchNouns vary the filed items' descriptions, so a search has rare and
// common words to find.
var benchNouns = []string{"database", "cache", "runner", "pipeline", "router", "certificate", "invoice", "dashboard",
	"scheduler", "mailer", "gateway", "ledger", "replica", "bucket", "webhook", "exporter", "kernel", "compiler", "linter", "proxy"}

// BenchmarkSearchWorkItems100k searches the board through the tool (MCP
// client, server, search index, projection) with 100,000 items filed, and
// reports the median and the 99th percentile of one call (target: p50
// under 20 ms). The fill goes on while the index follows, so its time is
// the write path with indexing on.
func BenchmarkSearchWorkItems100k(b *testing.B) {
	h := newHarness(b)
	start := time.Now()
	fill(b, h, 100_000)
	filled := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.ix.WaitFor(ctx, h.node.Position()); err != nil {
		b.Fatal(err)
	}
	b.Logf("filed 100,000 items in %v; the index caught up %v later", filled.Round(time.Millisecond), (time.Since(start) - filled).Round(time.Millisecond))
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"rare words", map[string]any{"query": "ledger webhook", "mode": "keyword"}},
		{"common words", map[string]any{"query": "flaky build", "mode": "keyword"}},
		{"one item's number", map[string]any{"query": "item 54321", "mode": "keyword"}},
		{"a typo", map[string]any{"query": "certficate", "mode": "keyword"}},
		{"in a project", map[string]any{"query": "replica gateway", "mode": "keyword", "project": "OPS"}},
		{"hybrid (keyword alone, no model)", map[string]any{"query": "scheduler kernel"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				out := h.ok(ada, "search_work_items", tc.args)
				lat = append(lat, time.Since(t0))
				if len(out["items"].([]any)) == 0 {
					b.Fatalf("%s found nothing", tc.name)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkListWorkItems100k lists a filtered page of the board through the
// tool (MCP client, server, projection) with 100,000 items filed, and
// reports the median and the 99th percentile of one call.
func BenchmarkListWorkItems100k(b *testing.B) {
	h := newHarness(b)
	start := time.Now()
	fill(b, h, 100_000)
	b.Logf("filed 100,000 items in %v", time.Since(start).Round(time.Millisecond))
	// The search index follows the log on its own goroutine; measured while
	// it still indexes the fill, a list would be timed against that work.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.ix.WaitFor(ctx, h.node.Position()); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"project+status", map[string]any{"project": "CORE", "status": "in_progress", "limit": 50}},
		{"assignee", map[string]any{"assignee": "linus", "limit": 50}},
		{"project+label", map[string]any{"project": "OPS", "label": "flaky", "limit": 50}},
		{"status(all projects)", map[string]any{"status": "in_review", "limit": 50}},
		// The slow path: the assignee index is walked and most of what it
		// holds fails the status filter.
		{"assignee+status(filtered walk)", map[string]any{"assignee": "linus", "status": "done", "limit": 50}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				h.ok(ada, "list_work_items", tc.args)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkCreateWorkItem measures durable creates per second through the
// whole tool path: MCP call, checks, log append fsynced, projection, ledger.
// Concurrent callers are what lets the log group appends under one fsync,
// so it runs at 16 and at 64 callers (many seats filing at once).
func BenchmarkCreateWorkItem(b *testing.B) {
	for _, callers := range []int{16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			h := newHarness(b)
			start := statetest.RunWriters(b, callers, func(i int64) error {
				h.ok(ada, "create_work_item", map[string]any{"title": fmt.Sprintf("Bench item %d", i), "project": "CORE", "assignee": "alan"})
				return nil
			})
			searchtest.ReportWriteRates(b, start, "creates/s", h.node.Position(), h.ix)
		})
	}
}

// BenchmarkCreateWorkItemDirect is the same create without the MCP hop, to
// tell the transport's share from the write path's; with the search index
// following the log and, in the same run, with no index at all, to tell
// what indexing costs the write path.
func BenchmarkCreateWorkItemDirect(b *testing.B) {
	for _, indexed := range []bool{true, false} {
		for _, callers := range []int{16, 64} {
			b.Run(fmt.Sprintf("index=%v/callers=%d", indexed, callers), func(b *testing.B) {
				var node *state.Node
				var h *harness
				if indexed {
					h = newHarness(b)
					node = h.node
				} else {
					node, _ = statetest.OpenFaulty(b, b.TempDir(), state.Options{Projectors: Projectors()})
				}
				s := newSrv(Deps{Node: node, Directory: testDirectory})
				start := statetest.RunWriters(b, callers, func(i int64) error {
					_, err := s.createWorkItem(context.Background(), ada, createIn{Title: fmt.Sprintf("Bench item %d", i), Project: "CORE", Assignee: "alan"})
					return err
				})
				if indexed {
					searchtest.ReportWriteRates(b, start, "creates/s", node.Position(), h.ix)
				} else {
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
				}
			})
		}
	}
}
