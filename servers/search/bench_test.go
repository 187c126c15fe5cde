package search

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/state"
)

// benchWords is a vocabulary with a long tail, so a query's words range
// from common to rare as in real text.
var benchWords = func() []string {
	base := []string{"deploy", "build", "pipeline", "database", "postgres", "cache", "latency", "timeout", "login", "invoice",
		"billing", "report", "dashboard", "alert", "metrics", "storage", "backup", "restore", "migration", "schema",
		"release", "rollback", "queue", "worker", "retry", "network", "router", "certificate", "token", "session",
		"car", "soup", "storm", "kitten", "budget", "meeting", "roadmap", "design", "review", "flaky"}
	out := append([]string(nil), base...)
	for i := range 3000 {
		out = append(out, fmt.Sprintf("term%04d", i))
	}
	return out
}()

// benchDoc is document i: a title of 4 to 8 words and a body of 20 to 60,
// drawn with a skew towards the first words of the vocabulary.
func benchDoc(i int) Doc {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	words := func(n int) string {
		ws := make([]string, n)
		for j := range ws {
			k := int(float64(len(benchWords)) * r.Float64() * r.Float64() * r.Float64())
			ws[j] = benchWords[k]
		}
		return strings.Join(ws, " ")
	}
	return Doc{ID: fmt.Sprintf("doc-%05d", i), Title: words(4 + r.IntN(5)), Body: words(20+r.IntN(41)) + ".", Scope: fmt.Sprintf("S%d", i%4)}
}

// fillDocs writes n documents through the node from many writers at once
// and waits until both indexes hold them.
func fillDocs(b *testing.B, h *harness, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				p, _ := json.Marshal(docPayload{Doc: benchDoc(i)})
				a, err := h.node.Write(context.Background(), state.Op{Tool: "put_doc", Args: p, Kind: opPutDoc, Payload: p})
				if err != nil || a.Outcome != state.Applied {
					failed.Store(fmt.Sprintf("%+v %v", a, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := h.ix.WaitEmbedded(ctx, h.node.Position()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSearch10k searches 10,000 documents and reports the median and
// the 99th percentile of one search: by keyword (target: p50 under 20 ms),
// and hybrid and semantic with the loopback embeddings provider (each
// query's vector is one HTTP round trip to it).
func BenchmarkSearch10k(b *testing.B) {
	p := searchtest.NewProvider(b)
	h := newHarness(b, NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192))
	start := time.Now()
	fillDocs(b, h, 10_000)
	b.Logf("10,000 documents written and indexed (keyword and vectors) in %v", time.Since(start).Round(time.Millisecond))
	queries := []string{"database migration", "flaky build pipeline", "term0042", "\"release rollback\"", "invoce", "car storm", "latency alert dashboard worker"}
	for _, tc := range []struct {
		mode, scope string
	}{{ModeKeyword, ""}, {ModeKeyword, "S1"}, {ModeHybrid, ""}, {ModeSemantic, ""}} {
		b.Run(fmt.Sprintf("mode=%s,scope=%q", tc.mode, tc.scope), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				res, err := h.ix.Search(context.Background(), Query{Text: queries[i%len(queries)], Mode: tc.mode, Scope: tc.scope})
				if err != nil || res.Mode != tc.mode {
					b.Fatalf("%v %+v", err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
