package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// tokenVar names the variable the hub reads the operator token from. If it
// is set for crewlet-load, that token is used; otherwise a fresh one is made.
const tokenVar = "CREWLET_LOAD_TOKEN"

// Tool names in the hub's catalogue: each upstream's echo behind its prefix.
const (
	hubHTTPTool  = "http_echo"
	hubStdioTool = "stdio_echo"
)

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	hubBin := fs.String("hub-binary", "", "the crewlet binary; default: crewlet beside this binary, then on PATH, then `go build ./cmd/crewlet` from the current module")
	duration := fs.Duration("duration", 10*time.Second, "how long each measurement runs")
	sessionList := fs.String("sessions", "1,8,64", "concurrency levels: how many client sessions call at once")
	maxCalls := fs.Int64("max-calls", 2_000_000, "bound on the calls of one measurement")
	callTimeout := fs.Duration("call-timeout", 10*time.Second, "bound on one call")
	rounds := fs.Int("rounds", 1, "measure every row this many times, interleaved, and report the round with the median calls/s (for a noisy machine)")
	var hubEnv listFlag
	fs.Var(&hubEnv, "hub-env", "KEY=VALUE added to the hub's environment only, e.g. GOGC=400 (repeatable)")
	keep := fs.Bool("keep", false, "keep the temporary directory (company file, hub log)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Parsing stops at the first word that is not a flag: whatever
	// follows would be silently ignored, flags included.
	if fs.NArg() > 0 {
		return fmt.Errorf("run takes flags only; %q is not one", fs.Arg(0))
	}
	levels, err := parseLevels(*sessionList)
	if err != nil {
		return err
	}
	if *rounds < 1 {
		return errors.New("--rounds: at least 1")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "crewlet-load-")
	if err != nil {
		return err
	}
	defer func() {
		// Kept after a failure, for its hub log; not after an interrupt,
		// which is no failure of the hub's.
		if *keep || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(os.Stderr, "crewlet-load: kept %s (company.yaml, hub.log)\n", tmp)
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

	// The HTTP echo server is a process of its own, as a vendor's server
	// would be, so the load generator's runtime (its GC, its scheduler)
	// is not shared with the server it measures.
	echoCmd := exec.Command(self, "echo-server", "--http", "127.0.0.1:0")
	echoCmd.Stderr = os.Stderr
	echoOut, err := echoCmd.StdoutPipe()
	if err != nil {
		return err
	}
	echo, err := startProc("echo server", echoCmd)
	if err != nil {
		return err
	}
	defer echo.stop(5 * time.Second)
	echoAddr, err := firstLine(echoOut, "listening ", 10*time.Second, echo.done)
	if err != nil {
		return fmt.Errorf("echo server: %w", err)
	}
	echoURL := "http://" + echoAddr + "/mcp"

	token := os.Getenv(tokenVar)
	if token == "" {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		token = hex.EncodeToString(raw[:])
	}
	cfg := filepath.Join(tmp, "company.yaml")
	if err := os.WriteFile(cfg, []byte(company(echoURL, self)), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(tmp, "hub.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	hubCmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", tmp, "--config", cfg)
	hubCmd.Env = append(append(os.Environ(), tokenVar+"="+token), hubEnv...)
	hubCmd.Stdout, hubCmd.Stderr = logf, logf
	hub, err := startProc("hub", hubCmd)
	if err != nil {
		return err
	}
	defer func() {
		// The hub's stdio child leads its own group; if the hub could not
		// stop it, it is reaped here.
		kids := childGroups(hub.cmd.Process.Pid)
		hub.stop(15 * time.Second)
		for _, g := range kids {
			// Only while the pid is still this program (the stdio echo
			// server): once the hub has reaped it, the pid may be anyone's.
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", g)); err == nil && exe == self {
				_ = syscall.Kill(-g, syscall.SIGKILL)
			}
		}
	}()
	hubAddr, err := waitListenAddr(ctx, filepath.Join(tmp, "listen-addr"), hub, 30*time.Second)
	if err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}
	hubURL := "http://" + hubAddr + "/operator/mcp"

	// The default Transport keeps 2 idle connections per host, which would
	// make 64 sessions open and close a connection per call.
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	if err := waitTools(ctx, hubURL, token, tr, 30*time.Second, hubHTTPTool, hubStdioTool); err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}

	// The hub's one child is the stdio echo server.
	stdioChild := 0
	if kids := childGroups(hub.cmd.Process.Pid); len(kids) == 1 {
		stdioChild = kids[0]
	}
	echoPID, hubPID := echo.cmd.Process.Pid, hub.cmd.Process.Pid
	targets := []target{
		{path: "direct http", url: echoURL, tool: "echo", cpu: cpuRoles{upstream: echoPID}},
		{path: "hub -> http", url: hubURL, token: token, tool: hubHTTPTool, cpu: cpuRoles{hub: hubPID, upstream: echoPID}},
		{path: "hub -> stdio", url: hubURL, token: token, tool: hubStdioTool, cpu: cpuRoles{hub: hubPID, upstream: stdioChild}},
	}
	opts := loadOptions{duration: *duration, maxCalls: *maxCalls, callTimeout: *callTimeout, transport: tr}
	fmt.Printf("crewlet-load: %d CPUs, GOMAXPROCS %d; %s per measurement; echo %s; hub %s (%s)\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), *duration, echoURL, hubURL, bin)
	var rows []measurement
	for _, n := range levels {
		// Rounds are interleaved (direct, hub->http, hub->stdio, direct,
		// ...) so a burst of load from elsewhere on the machine falls on
		// every path alike rather than on one row.
		all := make([][]measurement, len(targets))
		for r := range *rounds {
			for k, t := range targets {
				m, err := measure(ctx, t, n, opts)
				if err != nil {
					printTable(os.Stdout, rows)
					return err
				}
				fmt.Printf("  %-13s x%-3d round %d: %9.0f calls/s\n", t.path, n, r+1, m.rate())
				all[k] = append(all[k], m)
				tr.CloseIdleConnections()
			}
		}
		for _, ms := range all {
			rows = append(rows, median(ms))
		}
	}
	printTable(os.Stdout, rows)
	return nil
}

// median is the measurement with the median rate (the lower middle one of
// an even count).
func median(ms []measurement) measurement {
	s := slices.Clone(ms)
	slices.SortFunc(s, func(a, b measurement) int { return cmp.Compare(a.rate(), b.rate()) })
	return s[(len(s)-1)/2]
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*l = append(*l, v)
	return nil
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("--sessions: %q is not a count of sessions from 1 to 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// company is the hub's company file: one admin operator whose token comes
// from tokenVar, and the echo upstream twice, over HTTP and as a stdio child
// (this binary), each behind its own prefix so the two echo tools do not
// collide.
func company(echoURL, self string) string {
	return fmt.Sprintf(`units:
  - id: load
    name: Load
    roles:
      - {name: Load, handle: load, kind: human, admin: true}
api:
  auth:
    tokens:
      - {id: load, token: "${%s}", seat: load}
mcp_servers:
  - name: echo_http
    url: %q
    tool_prefix: http_
  - name: echo_stdio
    command: %q
    args: [echo-server, --stdio]
    tool_prefix: stdio_
`, tokenVar, echoURL, self)
}

// findHub looks for the crewlet binary beside this one, then on PATH, and
// builds it from the current module as a last resort.
func findHub(ctx context.Context, self, tmp string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), "crewlet")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside, nil
	}
	if p, err := exec.LookPath("crewlet"); err == nil {
		return p, nil
	}
	out := filepath.Join(tmp, "crewlet")
	fmt.Fprintln(os.Stderr, "crewlet-load: building the hub: go build -o", out, "github.com/crewlet/hub/cmd/crewlet")
	b, err := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/crewlet/hub/cmd/crewlet").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("no --hub-binary, none beside this binary or on PATH, and building one failed: %w\n%s", err, b)
	}
	return out, nil
}

// waitListenAddr waits for the hub to write its address, which it does once
// it is ready to serve.
func waitListenAddr(ctx context.Context, path string, hub *proc, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b)), nil
		}
		if hub.exited() {
			return "", fmt.Errorf("it exited before listening (%v)", hub.err)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no %s within %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitTools waits until the hub lists every named tool: an upstream's tools
// arrive when it has started, which may be after the hub listens.
func waitTools(ctx context.Context, url, token string, tr http.RoundTripper, timeout time.Duration, names ...string) error {
	ss, err := connect(ctx, target{path: "hub", url: url, token: token}, 1, tr)
	if err != nil {
		return err
	}
	defer closeAll(ss)
	deadline := time.Now().Add(timeout)
	for {
		have := map[string]bool{}
		for tool, err := range ss[0].Tools(ctx, nil) {
			if err != nil {
				return err
			}
			have[tool.Name] = true
		}
		var missing []string
		for _, n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tools %v not listed within %s", missing, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printTable writes the rows as the table the README shows, with the hub
// path's rate as a share of the direct path's at the same concurrency.
func printTable(out io.Writer, rows []measurement) {
	if len(rows) == 0 {
		return
	}
	direct := map[int]float64{}
	for _, m := range rows {
		if m.target.token == "" {
			direct[m.sessions] = m.rate()
		}
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "path\tsessions\tcalls/s\tp50\tp99\tfailed\thub/direct\tCPU µs/call: client\thub\tupstream\t")
	for _, m := range rows {
		ratio := "-"
		if m.target.token != "" && direct[m.sessions] > 0 {
			ratio = fmt.Sprintf("%.2f", m.rate()/direct[m.sessions])
		}
		hubCPU := "-"
		if m.target.cpu.hub != 0 {
			hubCPU = perCall(m.cpu.hub, m.calls)
		}
		fmt.Fprintf(w, "%s\t%d\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", m.target.path, m.sessions, m.rate(),
			round(m.p50), round(m.p99), m.failed, ratio, perCall(m.cpu.client, m.calls), hubCPU, perCall(m.cpu.upstream, m.calls))
	}
	_ = w.Flush()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
