package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call left unanswered past stallAfter is reported while it still waits,
// once per call that stalls; calls answered in time are not.
func TestMeasureReportsAStalledCall(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "stall", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		if in.Text == "hold" && held.Add(1) == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var stalls atomic.Int32
	tg := target{path: "direct", rev: rev2026, url: srv.URL, tool: "echo",
		// The fifth call is held until the stall is reported.
		args: func(_, n int) map[string]any {
			if n == 4 {
				return map[string]any{"text": "hold"}
			}
			return map[string]any{"text": "go"}
		},
		check: succeeded}
	m, err := measure(context.Background(), tg, 1, loadOptions{duration: 10 * time.Second, maxCalls: 10, callTimeout: 5 * time.Second, transport: tr,
		stallAfter: 100 * time.Millisecond,
		stalled: func() {
			if stalls.Add(1) == 1 {
				close(release)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if m.calls != 10 || m.failed != 0 {
		t.Fatalf("calls %d failed %d, want 10 answered", m.calls, m.failed)
	}
	if n := stalls.Load(); n != 1 {
		t.Fatalf("%d stalls reported, want the one held call", n)
	}
}

// saveStall writes the hub's goroutines, fetched from its pprof handler,
// and this process's own.
func TestSaveStall(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/debug/pprof/goroutine", pprof.Handler("goroutine"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	name := filepath.Join(t.TempDir(), "row")
	if err := saveStall(context.Background(), strings.TrimPrefix(srv.URL, "http://"), name); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{name + ".stall.hub.txt", name + ".stall.client.txt"} {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "goroutine ") || !strings.Contains(string(b), "TestSaveStall") {
			t.Errorf("%s: %v, %.200s", f, err, b)
		}
	}
	// A hub without the handler is an error, and this process's goroutines
	// are saved all the same.
	name2 := filepath.Join(t.TempDir(), "row")
	if err := saveStall(context.Background(), strings.TrimPrefix(srv.URL, "http://")+"/nowhere", name2); err == nil {
		t.Error("a missing pprof handler was not reported")
	}
	if _, err := os.Stat(name2 + ".stall.client.txt"); err != nil {
		t.Error(err)
	}
}

// Every row of a run saves its profiles under a name of its own: the rows
// of the two clients, the revisions, the sessions and the rounds apart.
func TestProfileNamesDoNotCollide(t *testing.T) {
	base := target{path: "hub -> stdio", rev: rev2025}
	lean := base
	lean.client = clientLean
	other := base
	other.rev = rev2026
	seen := map[string]string{}
	for _, c := range []struct {
		what  string
		t     target
		n, rd int
	}{
		{"go-sdk", base, 1, 0}, {"lean", lean, 1, 0}, {"2026", other, 1, 0}, {"x8", base, 8, 0}, {"round 2", base, 1, 1},
	} {
		name := profileName("/p", c.t, c.n, c.rd)
		if prev, dup := seen[name]; dup {
			t.Errorf("%s and %s share %s", prev, c.what, name)
		}
		seen[name] = c.what
	}
	if got := profileName("/p", lean, 1, 0); got != "/p/hub-stdio-2025-11-25-lean-x1-r1" {
		t.Errorf("name %s", got)
	}
}
