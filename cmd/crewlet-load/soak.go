package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The soak: many sessions of mixed reads and writes against the hub and its
// native tracker for minutes, then a rest, to tell whether a node grows with
// time rather than with its data. It prints the hub's resident memory,
// goroutines, open files and processes at the start, at the end of the load
// and after the rest; what the closing rows show beyond the items written
// is growth.

// soakTool is one kind of call in the mix, and how often it is made.
type soakTool struct {
	name   string
	weight int
	args   func(s *soakState, r *rand.Rand) map[string]any
}

// soakState is what the sessions share: the keys of the items written so
// far, to read and comment on.
type soakState struct {
	mu   sync.Mutex
	keys []string
}

func (s *soakState) add(k string) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
}

func (s *soakState) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

func (s *soakState) pick(r *rand.Rand) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return "SOAK-1"
	}
	return s.keys[r.IntN(len(s.keys))]
}

// soakMix: reads dominate, as they do for people and agents alike; writes
// file items and comment on them; one call in twenty goes to a third-party
// server (a stdio child), so that path soaks too.
var soakMix = []soakTool{
	{"list_work_items", 40, func(*soakState, *rand.Rand) map[string]any { return map[string]any{"limit": 20} }},
	{"get_work_item", 25, func(s *soakState, r *rand.Rand) map[string]any { return map[string]any{"key": s.pick(r)} }},
	{"create_work_item", 15, func(_ *soakState, r *rand.Rand) map[string]any {
		return map[string]any{"title": fmt.Sprintf("soak item %d", r.Uint32()), "description": "filed by crewlet-load soak"}
	}},
	{"comment_on_work_item", 15, func(s *soakState, r *rand.Rand) map[string]any {
		return map[string]any{"key": s.pick(r), "body": fmt.Sprintf("soak comment %d", r.Uint32())}
	}},
	{hubStdioTool, 5, func(*soakState, *rand.Rand) map[string]any { return map[string]any{"text": echoText} }},
}

func pickTool(r *rand.Rand) soakTool {
	total := 0
	for _, t := range soakMix {
		total += t.weight
	}
	n := r.IntN(total)
	for _, t := range soakMix {
		if n < t.weight {
			return t
		}
		n -= t.weight
	}
	return soakMix[0]
}

// sample is the hub's footprint at one moment.
type sample struct {
	label      string
	rssKiB     int64
	goroutines int
	heapMiB    float64
	sessions   int
	files      int
	procs      int
}

func soak(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	hubBin := fs.String("hub-binary", "", "the crewlet binary; found as for run if empty")
	duration := fs.Duration("duration", 5*time.Minute, "how long the sessions call")
	sessions := fs.Int("sessions", 64, "how many client sessions call at once (half 2025-11-25, half 2026-07-28)")
	idle := fs.Duration("idle", 30*time.Second, "how long the hub rests after the load before the last sample")
	callTimeout := fs.Duration("call-timeout", 30*time.Second, "bound on one call")
	keep := fs.Bool("keep", false, "keep the temporary directory (company file, hub log, data)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sessions < 1 || *sessions > 1024 {
		return errors.New("--sessions: from 1 to 1024")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "crewlet-soak-")
	if err != nil {
		return err
	}
	defer func() {
		if *keep || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(os.Stderr, "crewlet-load: kept %s (company.yaml, hub.log, data)\n", tmp)
			return
		}
		_ = os.RemoveAll(tmp)
	}()
	bin := *hubBin
	if bin == "" {
		if bin, err = findHub(ctx, self, tmp); err != nil {
			return err
		}
	}
	var raw [16]byte
	_, _ = crand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	cfg := filepath.Join(tmp, "company.yaml")
	if err := os.WriteFile(cfg, []byte(soakCompany(self)), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(tmp, "hub.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	data := filepath.Join(tmp, "data")
	hubCmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg)
	hubCmd.Env = append(os.Environ(), tokenVar+"="+token)
	hubCmd.Stdout, hubCmd.Stderr = logf, logf
	hub, err := startProc("hub", hubCmd)
	if err != nil {
		return err
	}
	defer func() {
		kids := childGroups(hub.cmd.Process.Pid)
		hub.stop(15 * time.Second)
		for _, g := range kids {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", g)); err == nil && exe == self {
				_ = syscall.Kill(-g, syscall.SIGKILL)
			}
		}
	}()
	hubAddr, err := waitListenAddr(ctx, filepath.Join(data, "listen-addr"), hub, 30*time.Second)
	if err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}
	base := "http://" + hubAddr
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	if err := waitTools(ctx, base+"/operator/mcp", token, tr, 30*time.Second, "create_work_item", hubStdioTool); err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}
	hc := &http.Client{Transport: bearerRT{token, tr}}
	pid := hub.cmd.Process.Pid
	fmt.Printf("crewlet-load soak: %d sessions for %s, then %s idle; hub pid %d (%s)\n", *sessions, *duration, *idle, pid, bin)

	var samples []sample
	take := func(label string) error {
		s, err := sampleHub(ctx, label, pid, base, hc)
		if err != nil {
			return err
		}
		samples = append(samples, s)
		fmt.Printf("  %-28s rss %6.1f MiB  heap %6.1f MiB  goroutines %5d  sessions %4d  open files %4d  processes %d\n",
			s.label, float64(s.rssKiB)/1024, s.heapMiB, s.goroutines, s.sessions, s.files, s.procs)
		return nil
	}
	if err := take("start"); err != nil {
		return err
	}

	st := &soakState{}
	var calls, failed atomic.Int64
	var perTool sync.Map // name -> *atomic.Int64
	var firstErr error
	var errOnce sync.Once
	runCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "crewlet-soak", Version: "0"}, nil)
	var wg sync.WaitGroup
	var open []*mcp.ClientSession
	var openMu sync.Mutex
	for k := range *sessions {
		version := "2025-11-25"
		if k%2 == 1 {
			version = "2026-07-28"
		}
		cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
		cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/operator/mcp", HTTPClient: hc},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		ccancel()
		if err != nil {
			cancel()
			wg.Wait()
			closeAll(open)
			return fmt.Errorf("session %d (%s): %w", k, version, err)
		}
		openMu.Lock()
		open = append(open, cs)
		openMu.Unlock()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(k), uint64(time.Now().UnixNano())))
			for runCtx.Err() == nil {
				tool := pickTool(r)
				cctx, ccancel := context.WithTimeout(ctx, *callTimeout)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool.name, Arguments: tool.args(st, r)})
				ccancel()
				calls.Add(1)
				n, _ := perTool.LoadOrStore(tool.name, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					failed.Add(1)
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", tool.name, err) })
				case res.IsError && tool.name != "get_work_item" && tool.name != "comment_on_work_item":
					// A read or comment on a key not filed yet may be
					// refused; anything else failing is a failure.
					failed.Add(1)
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: %s", tool.name, textOfResult(res)) })
				case tool.name == "create_work_item":
					if key := keyOf(res); key != "" {
						st.add(key)
					}
				}
			}
		})
	}
	progress := time.NewTicker(time.Minute)
	defer progress.Stop()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	began := time.Now()
wait:
	for {
		select {
		case <-waited:
			break wait
		case <-progress.C:
			fmt.Printf("  %s: %d calls, %d failed, %d items\n", time.Since(began).Round(time.Second), calls.Load(), failed.Load(), st.count())
		}
	}
	if ctx.Err() != nil {
		closeAll(open)
		return ctx.Err()
	}
	elapsed := time.Since(began)
	if err := take("end of load (sessions open)"); err != nil {
		return err
	}
	closeAll(open)
	tr.CloseIdleConnections()
	select {
	case <-time.After(*idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := take(fmt.Sprintf("after %s idle", *idle)); err != nil {
		return err
	}

	fmt.Printf("  %d calls in %s (%.0f/s), %d failed; items filed: %d\n", calls.Load(), elapsed.Round(time.Second),
		float64(calls.Load())/elapsed.Seconds(), failed.Load(), st.count())
	var mix []string
	for _, t := range soakMix {
		if n, ok := perTool.Load(t.name); ok {
			mix = append(mix, fmt.Sprintf("%s %d", t.name, n.(*atomic.Int64).Load()))
		}
	}
	fmt.Printf("  mix: %s\n", strings.Join(mix, ", "))
	if firstErr != nil {
		fmt.Printf("  first failure: %v\n", firstErr)
	}
	if failed.Load() > calls.Load()/100 {
		return fmt.Errorf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	return nil
}

// soakCompany: one administrator whose unit owns project SOAK, the native
// tracker, and the echo server as a stdio child.
func soakCompany(self string) string {
	return fmt.Sprintf(`units:
  - id: soak
    name: Soak
    project: SOAK
    lead: load
    roles:
      - {name: Load, handle: load, kind: human, admin: true}
api:
  auth:
    tokens:
      - {id: load, token: "${%s}", seat: load}
mcp_servers:
  - name: echo_stdio
    command: %q
    args: [echo-server, --stdio]
    tool_prefix: stdio_
    trust: auto
`, tokenVar, self)
}

// sampleHub reads the hub's footprint: resident memory, open files and its
// processes (itself and every descendant) from /proc, goroutines, heap and
// open sessions from its /debug/runtime route.
func sampleHub(ctx context.Context, label string, pid int, base string, hc *http.Client) (sample, error) {
	s := sample{label: label}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.files = len(fds)
	s.procs = 1 + len(descendants(pid))
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/debug/runtime", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	var row struct {
		Goroutines       int    `json:"goroutines"`
		HeapAllocBytes   uint64 `json:"heap_alloc_bytes"`
		OperatorSessions int    `json:"operator_sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&row); err != nil || resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET /debug/runtime: %s %v", resp.Status, err)
	}
	s.goroutines, s.heapMiB, s.sessions = row.Goroutines, float64(row.HeapAllocBytes)/(1<<20), row.OperatorSessions
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
