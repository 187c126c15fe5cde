package hub

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The forwarding benchmarks call the same echo upstream three ways, so that
// what the hub costs a call is the difference between them:
//
//	BenchmarkForwardDirect       client -> echo (streamable HTTP)
//	BenchmarkForwardViaHubHTTP   client -> hub front -> echo (streamable HTTP)
//	BenchmarkForwardViaHubStdio  client -> hub front -> echo (stdio child)
//
// Each runs 1, 8 and 64 concurrent client sessions; b.N calls are shared
// among them. Everything but the stdio child runs in this process, so
// allocs/op counts the client's and the upstream's allocations as well as
// the hub's (the stdio child's are not counted). For a run against the built
// binaries, with process boundaries as deployed, see cmd/crewlet-load.
//
//	go test ./hub -run '^$' -bench Forward -benchtime 3s

var benchSessions = []int{1, 8, 64}

func BenchmarkForwardDirect(b *testing.B) {
	tr := newBenchTransport(b)
	runBenchLevels(b, benchTarget{url: newBenchEchoHTTP(b) + "/", tool: "echo", tr: tr})
}

func BenchmarkForwardViaHubHTTP(b *testing.B) {
	tr := newBenchTransport(b)
	echo := newBenchEchoHTTP(b)
	url, h := newBenchHub(b, fmt.Sprintf("  - name: echo_http\n    url: %q\n    tool_prefix: http_\n", echo), "http_echo")
	runBenchLevels(b, benchTarget{url: url, token: benchToken, tool: "http_echo", tr: tr})
	// The same calls with the SDK framing every tools/call, side by side
	// with the hub's own framing: what the framing saves (docs/performance.md,
	// "Why tools/call keeps its own framing beside the SDK").
	b.Run("framing=sdk", func(b *testing.B) {
		h.operator.noFast.Store(true)
		defer h.operator.noFast.Store(false)
		runBenchLevels(b, benchTarget{url: url, token: benchToken, tool: "http_echo", tr: tr})
	})
}

func BenchmarkForwardViaHubStdio(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	tr := newBenchTransport(b)
	url, _ := newBenchHub(b, fmt.Sprintf("  - name: echo_stdio\n    command: %q\n    env: {%s: stdio}\n    tool_prefix: stdio_\n",
		exe, benchEchoVar), "stdio_echo")
	runBenchLevels(b, benchTarget{url: url, token: benchToken, tool: "stdio_echo", tr: tr})
}

func runBenchLevels(b *testing.B, t benchTarget) {
	for _, n := range benchSessions {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchCalls(b, t, n) })
	}
}

const benchText = "hello from the forwarding benchmark"

func benchCall(ctx context.Context, cs *mcp.ClientSession, tool string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": benchText}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("%s: unexpected answer %+v", tool, res.Content)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != benchText {
		return fmt.Errorf("%s did not answer its text", tool)
	}
	return nil
}

// benchCalls shares b.N echo calls among n sessions, each calling back to
// back, and reports throughput and latency quantiles beside ns/op (which, with
// n sessions in parallel, is wall time per call, not the latency of one).
func benchCalls(b *testing.B, t benchTarget, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hc := &http.Client{Transport: t.tr}
	if t.token != "" {
		hc.Transport = hubtest.Bearer{Token: t.token, Base: t.tr}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	sessions := make([]*mcp.ClientSession, n)
	for k := range sessions {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: t.url, HTTPClient: hc}, nil)
		if err != nil {
			b.Fatalf("connect: %v", err)
		}
		defer cs.Close()
		sessions[k] = cs
		// One call per session before timing: connections are open and a
		// broken path fails here with its own error.
		if err := benchCall(ctx, cs, t.tool); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var failed atomic.Value
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	begin := time.Now()
	for k, cs := range sessions {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/n+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := benchCall(ctx, cs, t.tool); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			lat[k] = mine
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	q := func(f float64) float64 {
		i := min(max(int(f*float64(len(all))+0.5)-1, 0), len(all)-1)
		return float64(all[i].Microseconds())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
