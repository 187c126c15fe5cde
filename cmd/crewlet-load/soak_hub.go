package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hub as the soak sees it: the company it is given, its footprint,
// and the moment every session left by its client has been reclaimed.

// soakCompany: one administrator whose unit owns project SOAK, the
// native tracker, the HTTP echo; one token per group of clients (each the
// variable tokenVar_K), so that no credential holds more sessions, streams
// or calls than a person's caps allow.
func soakCompany(echoURL string, tokens int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `units:
  - id: soak
    name: Soak
    project: SOAK
    lead: load
    roles:
      - {name: Load, handle: load, kind: human, admin: true}
api:
  auth:
    tokens:
`)
	for k := range tokens {
		fmt.Fprintf(&b, "      - {id: load%d, token: \"${%s_%d}\", seat: load}\n", k, tokenVar, k)
	}
	fmt.Fprintf(&b, `mcp_servers:
  - name: echo_http
    url: %q
    tool_prefix: http_
    trust: auto
`, echoURL)
	return b.String()
}

// sample is the hub's footprint at one moment.
type sample struct {
	label      string
	rssKiB     int64
	anonKiB    int64 // of it anonymous: the heap, stacks, the runtime's own; the rest is mapped files
	goroutines int
	heapMiB    float64
	sessions   int
	files      int
	procs      int
}

// waitReclaimed waits until the hub holds no operator session, and says
// how long that took.
func waitReclaimed(ctx context.Context, base string, hc *http.Client, bound time.Duration) (time.Duration, error) {
	began := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := operatorSessions(ctx, base, hc)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return time.Since(began), nil
		}
		if time.Since(began) > bound {
			return 0, fmt.Errorf("the hub still holds %d sessions %s after their clients left", n, bound)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

func operatorSessions(ctx context.Context, base string, hc *http.Client) (int, error) {
	row, err := hubRuntime(ctx, base+"/debug/runtime", hc.Transport, "", false)
	return row.OperatorSessions, err
}

// sampleHub reads the hub's footprint: goroutines, heap and open sessions
// from its /debug/runtime route (after two collections if gc), then its
// resident memory, open files and processes (itself and every descendant)
// from /proc.
func sampleHub(ctx context.Context, label string, pid int, base string, hc *http.Client, gc bool) (sample, error) {
	s := sample{label: label}
	url := base + "/debug/runtime"
	if gc {
		// Live memory, not live memory plus the garbage the GC target
		// lets pile up: the hub collects and returns what it freed.
		url += "?gc=1"
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	var row runtimeRow
	if err := json.NewDecoder(resp.Body).Decode(&row); err != nil || resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /debug/runtime: %s %v", resp.Status, err)
	}
	s.goroutines, s.heapMiB, s.sessions = row.Goroutines, float64(row.HeapAllocBytes)/(1<<20), row.OperatorSessions
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		for _, f := range []struct {
			key string
			to  *int64
		}{{"VmRSS:", &s.rssKiB}, {"RssAnon:", &s.anonKiB}} {
			if v, ok := strings.CutPrefix(line, f.key); ok {
				*f.to, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.files = len(fds)
	s.procs = 1 + len(descendants(pid))
	return s, nil
}

// descendants lists every process below pid.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, field := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(field); err == nil {
					out = append(out, n)
					queue = append(queue, n)
				}
			}
		}
	}
	return out
}

// keyOf reads the key a create_work_item answered.
func keyOf(res *mcp.CallToolResult) string {
	if res.IsError {
		return ""
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v struct {
		Key  string `json:"key"`
		Item struct {
			Key string `json:"key"`
		} `json:"item"`
	}
	_ = json.Unmarshal(b, &v)
	if v.Key != "" {
		return v.Key
	}
	return v.Item.Key
}

func textOfResult(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
