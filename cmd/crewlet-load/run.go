package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokenVar names the variable the hub reads the operator token from. If it
// is set for crewlet-load, that token is used; otherwise a fresh one is made.
const tokenVar = "CREWLET_LOAD_TOKEN"

// Tool names in the hub's catalogue: each upstream's echo behind its prefix.
// The HTTP echo is configured twice. At its stateless path it is the
// upstream of the "hub -> http" rows, compared with clients of the same
// revision calling that path directly: one server, one handler, whichever
// path reaches it. At its path with sessions (the hub's link is then one
// 2025-11-25 session, which every client of the hub shares) it is the
// upstream of the "hub -> session" rows, compared with 2025 clients each
// holding a session of their own: what a hub costs in front of a server
// that keeps sessions, including that server serving one busy session
// rather than many.
const (
	hubHTTPTool    = "http_echo"
	hubSessionTool = "session_echo"
	hubStdioTool   = "stdio_echo"
	// echoTool is the echo server's own name for it, called directly and
	// through the relay.
	echoTool = "echo"
)

// Protocol revisions a client of the hub may speak: the last with
// sessions, and the first without.
const (
	rev2025 = "2025-11-25"
	rev2026 = "2026-07-28"
)

// Sections of a run.
const (
	secForward    = "forward"     // the echo tool: direct, through the hub over HTTP and over stdio
	secFirstParty = "first-party" // the hub's own tracker reads
	secTracker    = "tracker"     // durable creates and long lists through /operator/mcp
	secIdle       = "idle"        // what an idle 2025 session with its event stream holds
)

func run(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	hubBin := fs.String("hub-binary", "", "the crewlet binary; default: crewlet beside this binary, then on PATH, then `go build ./cmd/crewlet` from the current module")
	duration := fs.Duration("duration", 10*time.Second, "how long each measurement runs")
	sessionList := fs.String("sessions", "1,8,64", "concurrency levels of the forward and first-party sections: how many client sessions call at once")
	clientList := fs.String("clients", clientSDK, "the clients the calls are made with, each measured: "+clientSDK+" (the go-sdk client, reading each answer as it does) or "+clientLean+" (the same requests on go-sdk sessions, each answer read once, so the client's decoding does not crowd the server out of the cores)")
	revList := fs.String("revisions", rev2025+","+rev2026, "the protocol revisions the client sessions speak, each measured")
	sectionList := fs.String("sections", strings.Join([]string{secForward, secFirstParty, secTracker, secIdle}, ","), "what to measure")
	writeSessions := fs.Int("write-sessions", 64, "sessions calling create_work_item at once (tracker section)")
	listSessions := fs.Int("list-sessions", 16, "sessions calling list_work_items with limit 50 at once (tracker section)")
	idleSessions := fs.Int("idle-sessions", 1000, "2025-11-25 sessions held open, idle, with their event streams (idle section)")
	maxCalls := fs.Int64("max-calls", 2_000_000, "bound on the calls of one measurement")
	callTimeout := fs.Duration("call-timeout", 10*time.Second, "bound on one call")
	rounds := fs.Int("rounds", 1, "measure every row this many times, interleaved, and report the round with the median calls/s (for a noisy machine)")
	var hubEnv listFlag
	fs.Var(&hubEnv, "hub-env", "KEY=VALUE added to the hub's environment only, e.g. GOGC=400 (repeatable)")
	stallAfter := fs.Duration("stall-after", 2*time.Second, "with --profile: a call unanswered this long saves the goroutines of the hub and of this process, once per row (NAME.stall.hub.txt, NAME.stall.client.txt)")
	profile := fs.String("profile", "", "a directory: a hub built with -tags pprof is asked for a CPU and an allocation profile of every hub row, saved there")
	keep := fs.Bool("keep", false, "keep the temporary directory (company file, hub log)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	levels, err := parseLevels(*sessionList)
	if err != nil {
		return err
	}
	revs, err := parseEither("revisions", *revList, rev2025, rev2026)
	if err != nil {
		return err
	}
	clients, err := parseEither("clients", *clientList, clientSDK, clientLean)
	if err != nil {
		return err
	}
	// eachClient makes a row of every target for every client measured.
	eachClient := func(ts ...target) []target {
		var out []target
		for _, t := range ts {
			for _, c := range clients {
				t.client = c
				out = append(out, t)
			}
		}
		return out
	}
	sections := map[string]bool{}
	for s := range strings.SplitSeq(*sectionList, ",") {
		switch s = strings.TrimSpace(s); s {
		case secForward, secFirstParty, secTracker, secIdle:
			sections[s] = true
		default:
			return fmt.Errorf("--sections: %q is none of %s, %s, %s, %s", s, secForward, secFirstParty, secTracker, secIdle)
		}
	}
	if *rounds < 1 {
		return errors.New("--rounds: at least 1")
	}
	b, err := openBench(ctx, "crewlet-load-", *hubBin)
	if err != nil {
		return err
	}
	defer func() { b.close(ctx, *keep, err, "company.yaml, hub.log") }()
	self, tmp, bin, echo, echoAddr := b.self, b.tmp, b.bin, b.echo, b.echoAddr
	echoURL := "http://" + echoAddr + "/mcp"

	// The reference relay (Go's own reverse proxy) is a process of its own
	// too, measured as the hub is.
	relayURL, relayPID := "", 0
	if sections[secForward] {
		relay, relayAddr, err := startServer("relay", self, "relay", "--listen", "127.0.0.1:0", "--to", "http://"+echoAddr)
		if err != nil {
			return err
		}
		defer relay.stop(5 * time.Second)
		relayURL, relayPID = "http://"+relayAddr+"/mcp", relay.cmd.Process.Pid
	}
	// So is the plain go-sdk proxy, the MCP gateway the SDK alone makes.
	proxyURL, proxyPID := "", 0
	if sections[secForward] {
		proxy, proxyAddr, err := startServer("sdk proxy", self, "sdk-proxy", "--listen", "127.0.0.1:0", "--to", echoURL)
		if err != nil {
			return err
		}
		defer proxy.stop(5 * time.Second)
		proxyURL, proxyPID = "http://"+proxyAddr+"/mcp", proxy.cmd.Process.Pid
	}

	token := os.Getenv(tokenVar)
	if token == "" {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		token = hex.EncodeToString(raw[:])
	}
	cfg := filepath.Join(tmp, "company.yaml")
	if err := os.WriteFile(cfg, []byte(company("http://"+echoAddr, self)), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(tmp, "hub.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	pprofAddr := ""
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return err
		}
		if pprofAddr, err = freeAddr(); err != nil {
			return err
		}
		hubEnv = append(hubEnv, "CREWLET_PPROF="+pprofAddr)
	}
	// Room for the idle sessions' event streams, each a connection.
	hubCmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", tmp, "--config", cfg,
		"--max-conns", strconv.Itoa(max(*idleSessions, 1000)+256))
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
	runtimeURL := "http://" + hubAddr + "/debug/runtime"

	// The default Transport keeps 2 idle connections per host, which would
	// make 64 sessions open and close a connection per call.
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	if err := waitTools(ctx, hubURL, token, tr, 30*time.Second, hubHTTPTool, hubSessionTool, hubStdioTool); err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}

	// The hub's one child is the stdio echo server.
	stdioChild := 0
	if kids := childGroups(hub.cmd.Process.Pid); len(kids) == 1 {
		stdioChild = kids[0]
	}
	echoPID, hubPID := echo.cmd.Process.Pid, hub.cmd.Process.Pid
	opts := loadOptions{duration: *duration, maxCalls: *maxCalls, callTimeout: *callTimeout, transport: tr}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("crewlet-load: %d CPUs, GOMAXPROCS %d; %s per measurement, %d round(s); load average %s; echo %s; hub %s (%s)\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), *duration, *rounds, strings.Join(strings.Fields(string(load))[:3], " "), echoURL, hubURL, bin)

	hubTarget := func(path, rev, tool string, upstreamPID int) target {
		return target{path: path, rev: rev, url: hubURL, token: token, tool: tool, baseline: "http",
			cpu: cpuRoles{hub: hubPID, upstream: upstreamPID}, runtime: runtimeURL}
	}
	sessionURL := "http://" + echoAddr + "/session/mcp"
	var groups [][]target
	for _, rev := range revs {
		if sections[secForward] {
			g := []target{
				{path: "direct http", rev: rev, url: echoURL, tool: echoTool, direct: true, baseline: "http", cpu: cpuRoles{upstream: echoPID}},
				hubTarget("hub -> http", rev, hubHTTPTool, echoPID),
				{path: "relay -> http", rev: rev, url: relayURL, tool: echoTool, baseline: "http", cpu: cpuRoles{hub: relayPID, upstream: echoPID}},
				{path: "sdk proxy -> http", rev: rev, url: proxyURL, tool: echoTool, baseline: "http", cpu: cpuRoles{hub: proxyPID, upstream: echoPID}},
				hubTarget("hub -> stdio", rev, hubStdioTool, stdioChild),
			}
			if rev == rev2025 {
				viaSession := hubTarget("hub -> session", rev, hubSessionTool, echoPID)
				viaSession.baseline = "session"
				g = append(g,
					target{path: "direct session", rev: rev, url: sessionURL, tool: echoTool, direct: true, baseline: "session", cpu: cpuRoles{upstream: echoPID}},
					viaSession)
			}
			groups = append(groups, eachClient(g...))
		}
	}
	var key string
	if sections[secFirstParty] || sections[secTracker] {
		if key, err = fileItem(ctx, hubTarget("", rev2025, "create_work_item", 0), tr, *callTimeout); err != nil {
			return err
		}
	}
	for _, rev := range revs {
		if sections[secFirstParty] {
			lp := hubTarget("hub list_projects", rev, "list_projects", 0)
			lp.args, lp.check = noArgs, succeeded
			gw := hubTarget("hub get_work_item", rev, "get_work_item", 0)
			gw.args = func(int, int) map[string]any { return map[string]any{"key": key} }
			gw.check = succeeded
			groups = append(groups, eachClient(lp, gw))
		}
	}
	var rows []measurement
	runRow := func(t target, n, round int) (measurement, error) {
		var prof *profiling
		if pprofAddr != "" && !t.direct {
			prof = startProfiles(ctx, pprofAddr, profileName(*profile, t, n, round), *duration)
		}
		o := opts
		if pprofAddr != "" {
			var once sync.Once
			name := profileName(*profile, t, n, round)
			o.stallAfter = *stallAfter
			o.stalled = func() {
				once.Do(func() {
					fmt.Fprintf(os.Stderr, "crewlet-load: a call of %s went unanswered for %s; goroutines saved in %s.stall.*.txt\n", t.path, *stallAfter, name)
					if err := saveStall(ctx, pprofAddr, name); err != nil {
						fmt.Fprintf(os.Stderr, "crewlet-load: saving the goroutines: %v\n", err)
					}
				})
			}
		}
		m, err := measure(ctx, t, n, o)
		if prof != nil {
			if perr := prof.wait(); perr != nil {
				fmt.Fprintf(os.Stderr, "crewlet-load: profile of %s: %v\n", t.path, perr)
			}
		}
		return m, err
	}
	for _, n := range levels {
		for _, g := range groups {
			// Rounds are interleaved (direct, hub->http, hub->stdio,
			// direct, ...) so a burst of load from elsewhere on the
			// machine falls on every path alike rather than on one row.
			all := make([][]measurement, len(g))
			for r := range *rounds {
				for k, t := range g {
					m, err := runRow(t, n, r)
					if err != nil {
						printTable(os.Stdout, rows)
						return err
					}
					fmt.Printf("  %-18s %s %s x%-3d round %d: %9.0f calls/s\n", t.path, t.rev, t.clientName(), n, r+1, m.rate())
					all[k] = append(all[k], m)
					tr.CloseIdleConnections()
				}
			}
			for _, ms := range all {
				rows = append(rows, median(ms))
			}
		}
	}
	if sections[secTracker] {
		for _, rev := range revs {
			cw := hubTarget("hub create_work_item", rev, "create_work_item", 0)
			cw.args = func(session, n int) map[string]any {
				return map[string]any{"title": fmt.Sprintf("load %s %d-%d-%d", rev, session, n, time.Now().UnixNano())}
			}
			cw.check = succeeded
			lw := hubTarget("hub list_work_items", rev, "list_work_items", 0)
			lw.args = func(int, int) map[string]any { return map[string]any{"limit": 50} }
			lw.check = listedAtLeast(50)
			for _, w := range []struct {
				t target
				n int
			}{{cw, *writeSessions}, {lw, *listSessions}} {
				for _, t := range eachClient(w.t) {
					var ms []measurement
					for r := range *rounds {
						m, err := runRow(t, w.n, r)
						if err != nil {
							printTable(os.Stdout, rows)
							return err
						}
						fmt.Printf("  %-18s %s %s x%-3d round %d: %9.0f calls/s\n", t.path, t.rev, t.clientName(), w.n, r+1, m.rate())
						ms = append(ms, m)
						tr.CloseIdleConnections()
					}
					rows = append(rows, median(ms))
				}
			}
		}
	}
	printTable(os.Stdout, rows)
	if sections[secIdle] {
		res, err := measureIdle(ctx, hubTarget("hub idle session", rev2025, "", 0), *idleSessions, tr,
			pprofAddr, filepath.Join(*profile, fmt.Sprintf("idle-%s-x%d", rev2025, *idleSessions)))
		if err != nil {
			return err
		}
		res.print()
	}
	return nil
}

// noArgs is a tool call without arguments.
func noArgs(int, int) map[string]any { return map[string]any{} }

// succeeded accepts any answer that is not a failure.
func succeeded(a answer) error {
	if a.isError {
		return fmt.Errorf("refused: %s", a.text())
	}
	return nil
}

// listedAtLeast accepts a list_work_items answer of at least n items, so a
// list is measured at the length asked for.
func listedAtLeast(n int) func(answer) error {
	return func(a answer) error {
		if err := succeeded(a); err != nil {
			return err
		}
		if a.items < n {
			return fmt.Errorf("listed %d items, not %d", max(a.items, 0), n)
		}
		return nil
	}
}

// fileItem files one work item for the reads to fetch.
func fileItem(ctx context.Context, t target, tr http.RoundTripper, timeout time.Duration) (string, error) {
	ss, err := connect(ctx, t, 1, tr)
	if err != nil {
		return "", err
	}
	defer closeAll(ss)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := ss[0].CallTool(cctx, &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "read by crewlet-load"}})
	if err != nil {
		return "", fmt.Errorf("filing the item to read: %w", err)
	}
	key := keyOf(res)
	if res.IsError || key == "" {
		return "", fmt.Errorf("filing the item to read: %s", textOfResult(res))
	}
	return key, nil
}

// profileName names the files of one hub row's profiles: one name per
// path, revision, client, sessions and round, so no row's files overwrite
// another's.
func profileName(dir string, t target, n, round int) string {
	name := strings.NewReplacer(" -> ", "-", " ", "-").Replace(t.path)
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%s-x%d-r%d", name, t.rev, t.clientName(), n, round+1))
}

// parseEither reads a comma-separated flag whose every word is a or b.
func parseEither(flag, s, a, b string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case a, b:
			out = append(out, f)
		default:
			return nil, fmt.Errorf("--%s: %q is neither %s nor %s", flag, f, a, b)
		}
	}
	return out, nil
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
// from tokenVar (it stands for every client of a run, so its caps per
// credential are lifted past any run's numbers), whose unit owns project
// LOAD of the native tracker, and the echo upstream three times: over HTTP statelessly and with sessions, and as
// a stdio child (this binary), each behind its own prefix so the echo tools
// do not collide.
func company(echoBase, self string) string {
	return fmt.Sprintf(`units:
  - id: load
    name: Load
    project: LOAD
    lead: load
    roles:
      - {name: Load, handle: load, kind: human, admin: true}
api:
  auth:
    tokens:
      - {id: load, token: "${%s}", seat: load}
  limits: {requests_per_credential: 1000000, sessions_per_credential: 1000000, streams_per_credential: 1000000, calls_per_credential: 1000000, calls_per_session: 1000000}
mcp_servers:
  - name: echo_http
    url: %q
    tool_prefix: http_
    trust: auto
  - name: echo_session
    url: %q
    tool_prefix: session_
    trust: auto
  - name: echo_stdio
    command: %q
    args: [echo-server, --stdio]
    tool_prefix: stdio_
    trust: auto
`, tokenVar, echoBase+"/mcp", echoBase+"/session/mcp", self)
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
