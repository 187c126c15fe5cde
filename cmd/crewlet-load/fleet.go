package main

import (
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
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/crewlet/hub/hub/hubtest/haproxy"
)

// The fleet command measures what a fleet behind a balancer serves: the
// echo tool forwarded over HTTP and durable first-party creates, through
// HAProxy (the configuration the README gives), in front of one node and
// of three, and three with one copy of the log against three copies. On
// one machine the nodes share its cores, so more nodes cannot give more
// calls a second there; each row therefore also says the CPU every node
// spent per call, which is what says how the work would spread over
// machines of their own.

// layout is one fleet measured: how many nodes and how many copies of the
// log and buckets they keep. One node runs without fleet flags, as a
// single hub does.
type layout struct{ nodes, replicas int }

func (l layout) String() string {
	if l.nodes == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes, --replicas %d", l.nodes, l.replicas)
}

// parseLayouts reads --layouts: "1" (one node alone), or NxR (N nodes
// keeping R copies), comma-separated.
func parseLayouts(s string) ([]layout, error) {
	var out []layout
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "1" {
			out = append(out, layout{1, 1})
			continue
		}
		n, r, ok := strings.Cut(f, "x")
		nodes, err1 := strconv.Atoi(n)
		replicas, err2 := strconv.Atoi(r)
		if !ok || err1 != nil || err2 != nil || nodes < 3 || nodes > 9 || replicas < 1 || replicas > nodes || replicas == 2 {
			return nil, fmt.Errorf("--layouts: %q is neither 1 (one node) nor NxR: N nodes from 3 to 9 keeping R copies, 1 or 3 up to N (two copies stop every write when either node is down)", f)
		}
		out = append(out, layout{nodes, replicas})
	}
	return out, nil
}

// fleetRow is one measurement through the balancer, with the CPU each
// node and the balancer spent during it.
type fleetRow struct {
	layout   layout
	m        measurement
	nodes    []time.Duration
	balancer time.Duration
}

func fleet(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	hubBin := fs.String("hub-binary", "", "the crewlet binary; default: crewlet beside this binary, then on PATH, then `go build ./cmd/crewlet` from the current module")
	layoutList := fs.String("layouts", "1,3x3,3x1", "the fleets measured: 1 (one node alone) or NxR (N nodes keeping R copies of the log)")
	duration := fs.Duration("duration", 10*time.Second, "how long each measurement runs")
	sessions := fs.Int("sessions", 64, "sessions calling the forwarded echo at once")
	writeSessions := fs.Int("write-sessions", 64, "sessions calling create_work_item at once")
	rev := fs.String("revision", rev2026, "the protocol revision the client sessions speak ("+rev2025+" needs a fleet that serves any session on any node)")
	rounds := fs.Int("rounds", 1, "measure every row this many times, the layouts interleaved, and report the round with the median calls/s")
	maxCalls := fs.Int64("max-calls", 2_000_000, "bound on the calls of one measurement")
	callTimeout := fs.Duration("call-timeout", 10*time.Second, "bound on one call")
	keep := fs.Bool("keep", false, "keep the temporary directory (company file, nodes' logs, haproxy.cfg and its log)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	layouts, err := parseLayouts(*layoutList)
	if err != nil {
		return err
	}
	if _, err := parseEither("revision", *rev, rev2025, rev2026); err != nil {
		return err
	}
	if *rounds < 1 || *sessions < 1 || *writeSessions < 1 {
		return errors.New("--rounds, --sessions and --write-sessions: at least 1")
	}
	if _, err := haproxy.Binary(); err != nil {
		return err
	}
	b, err := openBench(ctx, "crewlet-load-fleet-", *hubBin)
	if err != nil {
		return err
	}
	defer func() { b.close(ctx, *keep, err, "company.yaml, each node's log, haproxy.cfg and haproxy.log") }()
	self, tmp, bin, echo, echoAddr := b.self, b.tmp, b.bin, b.echo, b.echoAddr
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
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("crewlet-load fleet: %d CPUs shared by every node, haproxy, the echo server and this client; GOMAXPROCS %d; %s per measurement, %d round(s); load average %s; %s clients\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), *duration, *rounds, strings.Join(strings.Fields(string(load))[:3], " "), *rev)

	opts := loadOptions{duration: *duration, maxCalls: *maxCalls, callTimeout: *callTimeout, transport: tr}
	all := make([][]fleetRow, len(layouts))
	for r := range *rounds {
		for i, l := range layouts {
			// Each layout on fresh data directories: a fleet starts
			// on fresh data, and every layout files the same items.
			dir := filepath.Join(tmp, fmt.Sprintf("r%d-%s", r+1, strings.NewReplacer(" ", "", ",", "-").Replace(l.String())))
			rows, err := measureLayout(ctx, bin, self, cfg, dir, token, echo.cmd.Process.Pid, l, *rev, *sessions, *writeSessions, opts)
			if err != nil {
				printFleetTable(os.Stdout, medianRows(all))
				return fmt.Errorf("%s: %w", l, err)
			}
			all[i] = append(all[i], rows...)
			tr.CloseIdleConnections()
		}
	}
	printFleetTable(os.Stdout, medianRows(all))
	return nil
}

// medianRows keeps, per layout and row, the round with the median calls/s.
func medianRows(all [][]fleetRow) []fleetRow {
	var out []fleetRow
	for _, rows := range all {
		byPath := map[string][]fleetRow{}
		var order []string
		for _, r := range rows {
			if byPath[r.m.target.path] == nil {
				order = append(order, r.m.target.path)
			}
			byPath[r.m.target.path] = append(byPath[r.m.target.path], r)
		}
		for _, p := range order {
			rs := byPath[p]
			ms := make([]measurement, len(rs))
			for k, r := range rs {
				ms[k] = r.m
			}
			med := median(ms)
			for _, r := range rs {
				if r.m.rate() == med.rate() {
					out = append(out, r)
					break
				}
			}
		}
	}
	return out
}

// measureLayout starts l's nodes and HAProxy in front of them, measures
// the forwarded echo and the durable create through it, and stops them.
func measureLayout(ctx context.Context, bin, self, cfg, dir, token string, echoPID int, l layout, rev string, sessions, writeSessions int, o loadOptions) ([]fleetRow, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	routes := make([]string, l.nodes)
	for i := range routes {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		routes[i] = a
	}
	var secret [24]byte
	_, _ = rand.Read(secret[:])
	var nodes []*proc
	defer func() {
		for _, n := range nodes {
			kids := childGroups(n.cmd.Process.Pid)
			n.stop(15 * time.Second)
			for _, g := range kids {
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", g)); err == nil && exe == self {
					_ = syscall.Kill(-g, syscall.SIGKILL)
				}
			}
		}
	}()
	// A fleet starts once a majority of its nodes is up: all are
	// launched, then each is waited for.
	for i := range l.nodes {
		data := filepath.Join(dir, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, err
		}
		args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg}
		if l.nodes > 1 {
			var peers []string
			for k, r := range routes {
				if k != i {
					peers = append(peers, r)
				}
			}
			args = append(args, "--node", fmt.Sprintf("n%d", i), "--cluster-listen", routes[i], "--cluster-peers", strings.Join(peers, ","),
				"--replicas", strconv.Itoa(l.replicas))
		}
		logf, err := os.Create(filepath.Join(data, "hub.log"))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), tokenVar+"="+token, "CREWLET_CLUSTER_SECRET="+hex.EncodeToString(secret[:]))
		cmd.Stdout, cmd.Stderr = logf, logf
		p, err := startProc(fmt.Sprintf("node n%d", i), cmd)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, p)
	}
	var backends []haproxy.Node
	for i, n := range nodes {
		data := filepath.Join(dir, fmt.Sprintf("n%d", i))
		addr, err := waitListenAddr(ctx, filepath.Join(data, "listen-addr"), n, 2*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("node n%d: %w; its log is %s", i, err, filepath.Join(data, "hub.log"))
		}
		backends = append(backends, haproxy.Node{Name: fmt.Sprintf("n%d", i), Addr: addr})
	}
	front, err := freeAddr()
	if err != nil {
		return nil, err
	}
	lb, err := haproxy.Start(dir, front, backends)
	if err != nil {
		return nil, err
	}
	defer lb.Stop()
	url := "http://" + front + "/operator/mcp"
	// Every node lists the echo before any is measured: through the
	// balancer, each request of the wait lands on another node.
	for _, b := range backends {
		if err := waitTools(ctx, "http://"+b.Addr+"/operator/mcp", token, o.transport, time.Minute, hubHTTPTool); err != nil {
			return nil, fmt.Errorf("node %s: %w", b.Name, err)
		}
	}
	pids := make([]int, len(nodes))
	for i, n := range nodes {
		pids[i] = n.cmd.Process.Pid
	}
	fw := target{path: "forwarded echo", rev: rev, url: url, token: token, tool: hubHTTPTool, cpu: cpuRoles{upstream: echoPID}}
	cw := target{path: "create_work_item", rev: rev, url: url, token: token, tool: "create_work_item", check: succeeded}
	cw.args = func(session, n int) map[string]any {
		return map[string]any{"title": fmt.Sprintf("fleet load %d-%d-%d", session, n, time.Now().UnixNano())}
	}
	var rows []fleetRow
	for _, w := range []struct {
		t target
		n int
	}{{fw, sessions}, {cw, writeSessions}} {
		before, lb0 := cpuOf(pids), cpuOf([]int{lb.PID()})
		m, err := measure(ctx, w.t, w.n, o)
		if err != nil {
			return nil, err
		}
		after, lb1 := cpuOf(pids), cpuOf([]int{lb.PID()})
		row := fleetRow{layout: l, m: m, balancer: lb1[0] - lb0[0]}
		for i := range pids {
			row.nodes = append(row.nodes, after[i]-before[i])
		}
		fmt.Printf("  %-22s %-16s x%-3d: %9.0f calls/s\n", l, w.t.path, w.n, m.rate())
		rows = append(rows, row)
		o.transport.CloseIdleConnections()
	}
	return rows, nil
}

// cpuOf is the CPU time each of pids has used.
func cpuOf(pids []int) []time.Duration {
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		out[i], _ = procCPU(p)
	}
	return out
}

// printFleetTable prints each row: calls/s and latency through the
// balancer, and the CPU per call of the client, of all nodes together, of
// each node, and of HAProxy.
func printFleetTable(out io.Writer, rows []fleetRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "fleet\tcall\tsessions\tcalls/s\tp50\tp99\tfailed\tCPU µs/call: client\tall nodes\teach node\thaproxy\techo\t")
	for _, r := range rows {
		var sum time.Duration
		var each []string
		for _, d := range r.nodes {
			sum += d
			each = append(each, perCall(d, r.m.calls))
		}
		upstream := "-"
		if r.m.target.cpu.upstream != 0 {
			upstream = perCall(r.m.cpu.upstream, r.m.calls)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.layout, r.m.target.path, r.m.sessions, r.m.rate(),
			round(r.m.p50), round(r.m.p99), r.m.failed, perCall(r.m.cpu.client, r.m.calls), perCall(sum, r.m.calls), strings.Join(each, " / "), perCall(r.balancer, r.m.calls), upstream)
	}
	_ = w.Flush()
}
