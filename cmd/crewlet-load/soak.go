package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
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
	"syscall"
	"time"
)

// The soak: thousands of clients on one hub for minutes, idle and busy
// together, both revisions. Idle 2025-11-25 sessions hold nothing but
// their event stream; active callers, half 2025-11-25 and half
// 2026-07-28, call at a fixed total rate: forwarded calls to a go-sdk echo
// over HTTP, the native tracker's reads and writes. It prints, for every
// --interval, each kind's calls answered, refused and failed with p50, p99
// and max latency, and the hub's resident memory, goroutines, open files
// and sessions; then every client leaves at once (no DELETE: their
// connections close and they never come back), and the hub's memory is
// read again once it has reclaimed every session. Before it, for the
// comparison, --baseline-sessions callers alone call at the same rate.

// soakTool is one tool in the mix, its kind, and how often it is called.
type soakTool struct {
	name   string
	kind   string
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

// soakMix: half the calls are forwarded to the HTTP echo, as an
// assistant's calls to a vendor's server go; reads dominate the rest, as
// they do for people and agents alike; writes file items and comment on
// them.
var soakMix = []soakTool{
	{hubHTTPTool, kindForward, 50, func(*soakState, *rand.Rand) map[string]any { return map[string]any{"text": echoText} }},
	{"list_work_items", kindRead, 20, func(*soakState, *rand.Rand) map[string]any { return map[string]any{"limit": 20} }},
	{"get_work_item", kindRead, 15, func(s *soakState, r *rand.Rand) map[string]any { return map[string]any{"key": s.pick(r)} }},
	{"create_work_item", kindWrite, 10, func(_ *soakState, r *rand.Rand) map[string]any {
		return map[string]any{"title": fmt.Sprintf("soak item %d", r.Uint32()), "description": "filed by crewlet-load soak"}
	}},
	{"comment_on_work_item", kindWrite, 5, func(s *soakState, r *rand.Rand) map[string]any {
		return map[string]any{"key": s.pick(r), "body": fmt.Sprintf("soak comment %d", r.Uint32())}
	}},
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

type soakFlags struct {
	hubBin                                string
	idle, active, baselineSessions, group int
	rate                                  float64
	duration, interval, warmup, baseline  time.Duration
	sessionIdle, callTimeout              time.Duration
	keep, collect                         bool
}

func parseSoak(args []string) (soakFlags, error) {
	var f soakFlags
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.StringVar(&f.hubBin, "hub-binary", "", "the crewlet binary; found as for run if empty")
	fs.IntVar(&f.idle, "idle-sessions", 8000, "idle 2025-11-25 sessions, each holding its event stream")
	fs.IntVar(&f.active, "active", 2000, "active callers, half on 2025-11-25 (with their event streams), half on 2026-07-28")
	fs.Float64Var(&f.rate, "rate", 100, "calls per second, all active callers together")
	fs.DurationVar(&f.duration, "duration", 10*time.Minute, "how long the active callers call")
	fs.DurationVar(&f.interval, "interval", time.Minute, "one line of figures per interval")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Minute, "the start of the load left out of the growth and the p99 compared with the baseline")
	fs.DurationVar(&f.baseline, "baseline", time.Minute, "how long --baseline-sessions callers call alone, at --rate, before the idle clients come (0: no baseline)")
	fs.IntVar(&f.baselineSessions, "baseline-sessions", 64, "callers of the baseline (half on each revision)")
	fs.IntVar(&f.group, "clients-per-token", 32, "clients sharing one credential (under the hub's caps per credential)")
	fs.DurationVar(&f.sessionIdle, "session-idle", 30*time.Minute, "the hub's --session-idle: how long a session no request uses is kept, its stream open or not (longer than the soak, or the idle clients' sessions end during it); a session whose client left is reclaimed within the hub's grace, at most this")
	fs.DurationVar(&f.callTimeout, "call-timeout", 30*time.Second, "bound on one call")
	fs.BoolVar(&f.collect, "collect", true, "read each interval's memory after a collection (live memory, so growth shows apart from the garbage the GC target lets pile up; the collection is the hub's, inside the measured window)")
	fs.BoolVar(&f.keep, "keep", false, "keep the temporary directory (company file, hub log, data)")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	switch {
	case f.idle < 0 || f.active < 1 || f.baselineSessions < 1 || f.group < 1:
		return f, errors.New("--idle-sessions at least 0; --active, --baseline-sessions and --clients-per-token at least 1")
	case f.rate <= 0 || f.duration <= 0 || f.interval <= 0 || f.sessionIdle <= 0 || f.callTimeout <= 0:
		return f, errors.New("--rate, --duration, --interval, --session-idle and --call-timeout must be positive")
	}
	return f, nil
}

func soak(ctx context.Context, args []string) (err error) {
	f, err := parseSoak(args)
	if err != nil {
		return err
	}
	b, err := openBench(ctx, "crewlet-soak-", f.hubBin)
	if err != nil {
		return err
	}
	defer func() { b.close(ctx, f.keep, err, "company.yaml, hub.log, data") }()
	self, tmp, bin, echoAddr := b.self, b.tmp, b.bin, b.echoAddr

	// Clients k*group .. k*group+group-1 present token k; the baseline's
	// callers are clients of their own, numbered after the rest.
	clients := f.idle + f.active + f.baselineSessions
	tokens := make([]string, (clients+f.group-1)/f.group)
	hubEnv := os.Environ()
	for k := range tokens {
		var raw [16]byte
		_, _ = crand.Read(raw[:])
		tokens[k] = hex.EncodeToString(raw[:])
		hubEnv = append(hubEnv, fmt.Sprintf("%s_%d=%s", tokenVar, k, tokens[k]))
	}
	cfg := filepath.Join(tmp, "company.yaml")
	if err := os.WriteFile(cfg, []byte(soakCompany("http://"+echoAddr+"/mcp", len(tokens))), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(tmp, "hub.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	data := filepath.Join(tmp, "data")
	// Room for every client's connections: an event stream each, a call
	// each, and the hub's own.
	hubCmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg,
		"--session-idle", f.sessionIdle.String(), "--max-conns", strconv.Itoa(2*clients+1024))
	hubCmd.Env = hubEnv
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
	url := base + "/operator/mcp"
	// The soak's own reads of the hub go on connections of their own,
	// which stay when the clients leave.
	own := &http.Transport{MaxIdleConnsPerHost: 4}
	defer own.CloseIdleConnections()
	if err := waitTools(ctx, url, tokens[0], own, 30*time.Second, "create_work_item", hubHTTPTool); err != nil {
		return fmt.Errorf("hub: %w; its log is %s", err, logf.Name())
	}
	hc := &http.Client{Transport: bearerRT{tokens[0], own}}
	pid := hub.cmd.Process.Pid

	dialer := newLeavingDialer()
	tr := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: clients + 64, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	sc := soakClients{url: url, tr: tr, tokenOf: func(k int) string { return tokens[k/f.group] }}
	st := &soakState{}
	rec := newCallLog()
	loadAvg := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	out := soakOut
	fmt.Fprintf(out, "crewlet-load soak: %d idle 2025-11-25 sessions, %d active callers at %.0f calls/s for %s (baseline: %d callers for %s), session idle %s; hub pid %d (%s); load average %s\n",
		f.idle, f.active, f.rate, f.duration, f.baselineSessions, f.baseline, f.sessionIdle, pid, bin, loadAvg())

	var samples []sample
	take := func(label string, gc, quiet bool) (sample, error) {
		s, err := sampleHub(ctx, label, pid, base, hc, gc)
		if err != nil {
			return s, err
		}
		samples = append(samples, s)
		if quiet {
			return s, nil // a window's sample, printed on its line
		}
		fmt.Fprintf(out, "  %-36s rss %7.1f MiB (anonymous %7.1f)  heap %7.1f MiB  goroutines %6d  sessions %6d  open files %6d  processes %d\n",
			s.label, float64(s.rssKiB)/1024, float64(s.anonKiB)/1024, s.heapMiB, s.goroutines, s.sessions, s.files, s.procs)
		return s, nil
	}
	if _, err := take("start (after a collection)", true, false); err != nil {
		return err
	}

	// The baseline: its callers alone, at the same rate.
	var baseline *window
	if f.baseline > 0 {
		ss, err := sc.open(ctx, f.idle+f.active, f.baselineSessions, alternate)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		bctx, cancel := context.WithTimeout(ctx, f.baseline)
		callAtRate(bctx, ss, f.rate, f.callTimeout, st, rec)
		cancel()
		closeSessions(ss)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		baseline = rec.cut()
		fmt.Fprintf(out, "  baseline, %d callers and no idle clients, %s:\n", f.baselineSessions, f.baseline)
		printWindowHeader(out)
		s, err := take("end of baseline", f.collect, true)
		if err != nil {
			return err
		}
		printWindow(out, "base", baseline, s)
	}

	before, err := take("before the clients (after a collection)", true, false)
	if err != nil {
		return err
	}
	idle, err := sc.open(ctx, 0, f.idle, only2025)
	if err != nil {
		return fmt.Errorf("idle sessions: %w", err)
	}
	idleOpen, err := take(fmt.Sprintf("%d idle open (after a collection)", f.idle), true, false)
	if err != nil {
		return err
	}
	active, err := sc.open(ctx, f.idle, f.active, alternate)
	if err != nil {
		closeSessions(idle)
		return fmt.Errorf("active callers: %w", err)
	}
	allOpen, err := take(fmt.Sprintf("%d clients open (after a collection)", f.idle+f.active), true, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  client connections open: %d\n", dialer.open())

	// The load, a line per interval.
	total := newWindow()
	steady := newWindow() // past the warm-up
	var steadyFrom *sample
	printWindowHeader(out)
	lctx, cancel := context.WithTimeout(ctx, f.duration)
	called := make(chan struct{})
	go func() {
		defer close(called)
		callAtRate(lctx, active, f.rate, f.callTimeout, st, rec)
	}()
	began := time.Now()
	tick := time.NewTicker(f.interval)
	maxFiles := 0
	for n := 1; ; n++ {
		done := false
		select {
		case <-tick.C:
		case <-called:
			done = true
		}
		w := rec.cut()
		total.merge(w)
		elapsed := time.Since(began)
		s, err := take(fmt.Sprintf("after %s", elapsed.Round(time.Second)), f.collect, true)
		if err != nil {
			cancel()
			<-called
			return err
		}
		maxFiles = max(maxFiles, s.files)
		if elapsed > f.warmup+f.interval/2 || done && steadyFrom == nil {
			steady.merge(w)
		}
		if steadyFrom == nil && elapsed >= f.warmup-f.interval/2 {
			steadyFrom = &s
		}
		if !done || len(w.latencies)+len(w.outcomes) > 0 {
			printWindow(out, strconv.Itoa(n), w, s)
		}
		if done {
			break
		}
	}
	tick.Stop()
	cancel()
	elapsed := time.Since(began)
	end := samples[len(samples)-1]

	// Everyone leaves.
	dialer.leave()
	closeSessions(active)
	closeSessions(idle)
	tr.CloseIdleConnections()
	took, err := waitReclaimed(ctx, base, hc, 2*f.sessionIdle+time.Minute)
	if err != nil {
		return err
	}
	after, err := take(fmt.Sprintf("every session reclaimed, %s after leaving (after a collection)", took.Round(time.Second)), true, false)
	if err != nil {
		return err
	}

	// The summary.
	fmt.Fprintf(out, "\nsummary (load average %s):\n", loadAvg())
	calls := 0
	for _, k := range soakKinds {
		r := total.row(k)
		calls += r.answered + r.refused + r.failed
		fmt.Fprintf(out, "  %-8s answered %d, refused %d (documented), failed %d; p50 %s ms, p99 %s ms, max %s ms\n",
			k, r.answered, r.refused, r.failed, msText(r.p50), msText(r.p99), msText(r.peak))
	}
	fmt.Fprintf(out, "  %d calls in %s (%.1f/s); items filed %d\n", calls, elapsed.Round(time.Second), float64(calls)/elapsed.Seconds(), st.count())
	for _, l := range total.outcomeLines() {
		fmt.Fprintf(out, "  %s\n", l)
	}
	fw := steady.row(kindForward)
	if baseline != nil {
		b := baseline.row(kindForward)
		ratio := "-"
		if b.p99 > 0 {
			ratio = fmt.Sprintf("%.2f", float64(fw.p99)/float64(b.p99))
		}
		fmt.Fprintf(out, "  forwarded p99: %s ms past the warm-up with every client, %s ms with %d callers alone (ratio %s)\n",
			msText(fw.p99), msText(b.p99), f.baselineSessions, ratio)
	}
	if f.idle > 0 {
		fmt.Fprintf(out, "  resident memory per idle session (%d open): %.1f KiB\n", f.idle, float64(idleOpen.rssKiB-before.rssKiB)/float64(f.idle))
	}
	fmt.Fprintf(out, "  resident memory per client (%d open): %.1f KiB\n", f.idle+f.active, float64(allOpen.rssKiB-before.rssKiB)/float64(f.idle+f.active))
	if steadyFrom != nil && end.label != steadyFrom.label {
		mins := elapsed.Minutes() - f.warmup.Minutes()
		if mins > 0 {
			fmt.Fprintf(out, "  growth past the warm-up: rss %+.1f MiB a minute (%.1f to %.1f MiB), heap %+.1f MiB a minute (%.1f to %.1f MiB), goroutines %+d\n",
				float64(end.rssKiB-steadyFrom.rssKiB)/1024/mins, float64(steadyFrom.rssKiB)/1024, float64(end.rssKiB)/1024,
				(end.heapMiB-steadyFrom.heapMiB)/mins, steadyFrom.heapMiB, end.heapMiB, end.goroutines-steadyFrom.goroutines)
		}
	}
	fmt.Fprintf(out, "  open files at most %d; after leaving: rss %.1f MiB (before the clients %.1f MiB; anonymous %.1f and %.1f MiB, the rest mapped files), %d goroutines, %d sessions\n",
		maxFiles, float64(after.rssKiB)/1024, float64(before.rssKiB)/1024, float64(after.anonKiB)/1024, float64(before.anonKiB)/1024, after.goroutines, after.sessions)
	if n := total.failures(); n > 0 {
		return fmt.Errorf("%d calls failed other than by a documented refusal", n)
	}
	return nil
}
