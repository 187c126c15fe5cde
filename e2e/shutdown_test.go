package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 15, finding 5: SIGTERM ends the hub within its 10 s bound even
// with calls stuck on a server that never answers, from a 2025 session
// and a 2026-07-28 client alike, and each of those callers is answered
// rather than left waiting.
func TestSIGTERMWithCallsStuckOnAServer(t *testing.T) {
	stuck := hubtest.StuckUpstream(t, &mcp.Tool{Name: "hang"})
	h := hubWithServers(t, fmt.Sprintf("  - {name: stuck, url: %q}\n", stuck.URL))
	answers := make(chan string, 2)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs, err := goSDKClient(t, h.mcpURL(), e2eToken, version)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			// Bounded by the test, so a hub that never answers fails it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
			switch {
			case err != nil:
				answers <- version + ": " + err.Error()
			default:
				answers <- version + ": " + hubtest.Text(res)
			}
		}()
		select {
		case <-stuck.Started:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the call never reached the server", version)
		}
	}

	start := time.Now()
	h.signal(t, syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- h.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the hub exited uncleanly: %v\n%s", err, h.logs())
		}
	case <-time.After(12 * time.Second):
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("the hub was still running 12 s after SIGTERM\n%s", h.logs())
	}
	took := time.Since(start)
	t.Logf("stopped in %s", took)
	if took > 10*time.Second {
		t.Fatalf("stopping took %s, over its 10 s bound", took)
	}
	for range 2 {
		select {
		case a := <-answers:
			t.Logf("answered %q", a)
			if strings.Contains(a, "deadline exceeded") {
				t.Errorf("a stuck caller waited for its own deadline: %s", a)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a stuck caller got no answer after the hub stopped")
		}
	}
}
