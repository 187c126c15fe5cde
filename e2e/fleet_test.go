package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/servers/state/statetest/partition"
)

// The fleet, end to end (FLT-1..3, MCP-10, MCP-12, WR-4): three hub
// processes as one company on loopback, their NATS routes through proxies
// the test can cut. Run once with each node's embedded NATS server routed
// to the others', and once against an operator's NATS: three nats-server
// processes built from the module, each hub on its own.

const (
	fleetBeat = time.Second
	// The lease outlives a JetStream leader election (up to 9 s) and a
	// heartbeat, so a node killed while it leads the lease bucket does not
	// take every other node's leases with it.
	fleetTTL = 12 * time.Second
)

func TestFleetEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet of three hubs")
	}
	t.Parallel()
	runFleet(t, newFleetRig(t, false))
}

func TestFleetExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("a fleet of three hubs on three nats-servers")
	}
	t.Parallel()
	runFleet(t, newFleetRig(t, true))
}

// fleetRig is three hubs and what carries their routes.
type fleetRig struct {
	marker string
	env    []string
	mesh   *partition.Mesh
	dirs   []string
	args   [][]string
	hubs   []*hubProc
}

func newFleetRig(t *testing.T, external bool) *fleetRig {
	var mark [4]byte
	_, _ = rand.Read(mark[:])
	r := &fleetRig{marker: hex.EncodeToString(mark[:]), env: []string{"E2E_TOKEN=" + e2eToken}}
	bin := buildEverythingServer(t)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    project: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Alice
        handle: alice
        mcp_env: {worker: {WHO: "alice-%[1]s"}}
      - name: Bob
        handle: bob
        mcp_env: {worker: {WHO: "bob-%[1]s"}}
api: {auth: {tokens: [{id: ada, token: "${E2E_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, command: %[2]q, env: {WHO: "shared-%[1]s"}}
  - {name: worker, shared: false, command: %[2]q}
`, r.marker, bin)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	var err error
	if r.mesh, err = partition.NewMesh(routes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.mesh.Close)
	common := []string{"--config", cfg, "--heartbeat", fleetBeat.String(), "--lease-ttl", fleetTTL.String()}
	for i := range 3 {
		r.dirs = append(r.dirs, t.TempDir())
		node := fmt.Sprintf("n%d", i)
		if external {
			client := startNATSServer(t, i, routes[i], r.mesh)
			r.args = append(r.args, append([]string{"--node", node, "--nats", "nats://" + client}, common...))
			continue
		}
		r.args = append(r.args, append([]string{"--node", node, "--cluster-listen", routes[i],
			"--cluster-peers", strings.Join(r.mesh.Peers(i), ","), "--cluster-advertise", r.mesh.Dead()}, common...))
	}
	// A fleet starts only once enough of its nodes are up: launch them
	// all, then wait for each.
	for i := range 3 {
		r.hubs = append(r.hubs, launchHub(t, r.dirs[i], r.env, r.args[i]...))
	}
	for _, h := range r.hubs {
		h.awaitReady(t, 2*time.Minute)
	}
	return r
}

var natsServer struct {
	once sync.Once
	path string
	err  error
}

// startNATSServer runs one nats-server of an operator's cluster, routed
// through the mesh, and answers its client address.
func startNATSServer(t *testing.T, i int, route string, mesh *partition.Mesh) string {
	natsServer.once.Do(func() {
		dir := filepath.Join(os.TempDir(), "crewlet-e2e-bin")
		natsServer.path = filepath.Join(dir, "nats-server")
		var out bytes.Buffer
		cmd, ctx, cancel := boundedCommand(context.Background(), goBuildTimeout, "go", "build", "-o", natsServer.path+".tmp", "github.com/nats-io/nats-server/v2")
		defer cancel()
		cmd.Stdout, cmd.Stderr = &out, &out
		if timedOut, err := runBounded(cmd, ctx); timedOut || err != nil {
			natsServer.err = fmt.Errorf("go build nats-server (timed out %v): %v\n%s", timedOut, err, out.String())
			return
		}
		natsServer.err = os.Rename(natsServer.path+".tmp", natsServer.path)
	})
	if natsServer.err != nil {
		t.Fatal(natsServer.err)
	}
	client := "127.0.0.1:" + strconv.Itoa(freePort(t))
	dir := t.TempDir()
	var peers []string
	for _, p := range mesh.Peers(i) {
		peers = append(peers, strconv.Quote("nats://"+p))
	}
	conf := fmt.Sprintf(`server_name: ns%d
listen: %q
jetstream { store_dir: %q }
cluster {
  name: crewlet-e2e
  listen: %q
  advertise: %q
  routes: [%s]
}
`, i, client, filepath.Join(dir, "js"), route, mesh.Dead(), strings.Join(peers, ", "))
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(natsServer.path, "-c", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", client, time.Second)
		if err == nil {
			c.Close()
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server %d does not answer: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetView is GET /fleet.
type fleetView struct {
	Node    string            `json:"node"`
	Holders map[string]string `json:"holders"`
}

func (r *fleetRig) fleet(t *testing.T, i int) fleetView {
	var v fleetView
	r.getJSON(t, i, "/fleet", &v)
	return v
}

func (r *fleetRig) getJSON(t *testing.T, i int, path string, v any) {
	req, _ := http.NewRequest("GET", r.hubs[i].baseURL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s on n%d: %v", path, i, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s on n%d: %v", path, i, err)
	}
}

// proc is a process a hub started for a seat, found anywhere on the
// machine by the marker in its environment.
type proc struct{ pid, ppid int }

// seatProcs finds every process carrying WHO=<who>-<marker>.
func (r *fleetRig) seatProcs(who string) []proc {
	var out []proc
	want := "WHO=" + who + "-" + r.marker
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range envs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(want)) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		out = append(out, proc{pid, ppid})
	}
	return out
}

// runsOn is the node whose process is the one parent of who's one child,
// or -1.
func (r *fleetRig) runsOn(who string) int {
	ps := r.seatProcs(who)
	if len(ps) != 1 {
		return -1
	}
	for i, h := range r.hubs {
		if h.cmd.ProcessState == nil && h.cmd.Process.Pid == ps[0].ppid {
			return i
		}
	}
	return -1
}

func (r *fleetRig) client(t *testing.T, i int) *mcp.ClientSession {
	cs, err := goSDKClient(t, r.hubs[i].mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// create files an item and says how it was answered.
func create(cs *mcp.ClientSession, title string, within time.Duration) (outcome, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": title}})
	if err != nil {
		return "no answer", ""
	}
	var out struct {
		Outcome string `json:"outcome"`
		Key     string `json:"key"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if res.IsError {
		if strings.Contains(string(b), `"outcome":"unknown"`) {
			return "unknown", ""
		}
		return "refused", ""
	}
	return out.Outcome, out.Key
}

// titles counts the items of CORE by title, as node i's projection has them.
func titles(t *testing.T, cs *mcp.ClientSession) map[string]int {
	out := map[string]int{}
	cursor := ""
	for {
		args := map[string]any{"project": "CORE", "limit": 200}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res := callTool(t, cs, "list_work_items", args)
		if res.IsError {
			t.Fatalf("list_work_items: %v", res.Content)
		}
		var page struct {
			Items []struct {
				Title string `json:"title"`
			} `json:"items"`
			Next string `json:"next_cursor"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &page)
		for _, it := range page.Items {
			out[it.Title]++
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() (bool, string)) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; %s", what, within, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cellOf is node's cell in server's row as node i shows it.
func (r *fleetRig) cellOf(t *testing.T, i int, server, node string) map[string]any {
	var rows struct {
		Servers []struct {
			Name  string           `json:"name"`
			Nodes []map[string]any `json:"nodes"`
		} `json:"servers"`
	}
	r.getJSON(t, i, "/mcp-servers", &rows)
	for _, row := range rows.Servers {
		if row.Name != server {
			continue
		}
		for _, c := range row.Nodes {
			if c["node"] == node {
				return c
			}
		}
	}
	return nil
}

func runFleet(t *testing.T, r *fleetRig) {
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	phase("the fleet is up")
	// Every seat's child runs once, on the node holding its lease.
	waitUntil(t, time.Minute, "each seat's child on its holder", func() (bool, string) {
		v := r.fleet(t, 0)
		a, b := r.runsOn("alice"), r.runsOn("bob")
		return a >= 0 && b >= 0 && v.Holders["alice"] == fmt.Sprintf("n%d", a) && v.Holders["bob"] == fmt.Sprintf("n%d", b),
			fmt.Sprintf("holders %v; alice on %d, bob on %d", v.Holders, a, b)
	})
	// MCP-12, FLT-2: one cell per node, from each node's heartbeat.
	waitUntil(t, 10*time.Second, "a Running cell per node for the shared server", func() (bool, string) {
		var cells []string
		for _, n := range []string{"n0", "n1", "n2"} {
			c := r.cellOf(t, 0, "echo", n)
			cells = append(cells, fmt.Sprint(c["state"]))
		}
		return strings.Join(cells, ",") == "Running,Running,Running", strings.Join(cells, ",")
	})

	phase("seats placed, a cell per node")
	// FLT-3: written on one node, read on the others from their own
	// projections.
	clients := []*mcp.ClientSession{r.client(t, 0), r.client(t, 1), r.client(t, 2)}
	first := "first-" + r.marker
	if out, key := create(clients[0], first, 10*time.Second); out != "applied" || key == "" {
		t.Fatalf("a write on n0: %s", out)
	}
	for i := 1; i < 3; i++ {
		waitUntil(t, 10*time.Second, fmt.Sprintf("n%d reads the item from its own projection", i), func() (bool, string) {
			n := titles(t, clients[i])[first]
			return n == 1, fmt.Sprint(n)
		})
	}

	// Writes through every node while the node holding alice is killed.
	victim := r.runsOn("alice")
	type answer struct{ title, outcome string }
	var mu sync.Mutex
	var answers []answer
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for i, cs := range clients {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				// Paced: enough writes to straddle the kill, few enough
				// to read back quickly.
				time.Sleep(50 * time.Millisecond)
				title := fmt.Sprintf("w%d-%d-%s", i, k, r.marker)
				out, _ := create(cs, title, 5*time.Second)
				mu.Lock()
				answers = append(answers, answer{title, out})
				mu.Unlock()
				if i == victim && out == "no answer" {
					return
				}
			}
		}()
	}
	waitUntil(t, 30*time.Second, "writes applied before the kill", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) >= 15, fmt.Sprint(len(answers))
	})
	phase("writes running; kill -9")
	killed := time.Now()
	if err := syscall.Kill(-r.hubs[victim].cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.hubs[victim].cmd.Wait()
	live := (victim + 1) % 3
	victimName := fmt.Sprintf("n%d", victim)

	// MCP-12: the killed node's cell goes to Not reported once it misses
	// three heartbeats.
	waitUntil(t, 4*fleetBeat+5*time.Second, "the killed node is not reported", func() (bool, string) {
		c := r.cellOf(t, live, "echo", victimName)
		return c != nil && c["state"] == "Not reported", fmt.Sprint(c)
	})
	// FLT-1: the seat moves to a live node within the lease's TTL and a
	// heartbeat, and its child runs there and nowhere else.
	moved := waitUntil(t, 2*fleetTTL, "alice moves", func() (bool, string) {
		h := r.fleet(t, live).Holders["alice"]
		return h != "" && h != victimName, h
	})
	running := waitUntil(t, 10*time.Second, "alice's one child on her new holder", func() (bool, string) {
		on := r.runsOn("alice")
		return on >= 0 && on != victim && r.fleet(t, live).Holders["alice"] == fmt.Sprintf("n%d", on), fmt.Sprint(r.seatProcs("alice"))
	})
	t.Logf("benchmark: seat moved %s after kill -9 (lease %s, heartbeat %s); its child ran on the new node %s after", moved.Sub(killed).Round(10*time.Millisecond), fleetTTL, fleetBeat, running.Sub(killed).Round(10*time.Millisecond))
	if took := moved.Sub(killed); took > fleetTTL+fleetBeat+time.Second {
		t.Errorf("the seat took %s to move; the bound is the lease's TTL and a heartbeat (%s)", took, fleetTTL+fleetBeat)
	}
	close(stop)
	writers.Wait()
	phase("the seat moved")

	// No write answered applied is lost, none is applied twice, and an
	// unknown one landed at most once.
	check := func(i int) {
		cs := r.client(t, i)
		var seen map[string]int
		// Each node reads its own projection, which reaches the log's end
		// a moment after the writing node's did (WR-3 is per node).
		waitUntil(t, 30*time.Second, fmt.Sprintf("n%d projects every applied write", i), func() (bool, string) {
			seen = titles(t, cs)
			for _, a := range answers {
				if a.outcome == "applied" && seen[a.title] == 0 {
					return false, a.title + " missing"
				}
			}
			return true, ""
		})
		applied := 0
		for _, a := range answers {
			switch n := seen[a.title]; {
			case a.outcome == "applied" && n != 1:
				t.Fatalf("n%d holds %s, answered applied, %d times", i, a.title, n)
			case n > 1:
				t.Fatalf("n%d holds %s, answered %s, %d times", i, a.title, a.outcome, n)
			case a.outcome == "applied":
				applied++
			}
		}
		t.Logf("n%d holds all %d writes answered applied, each once (%d answers in all)", i, applied, len(answers))
	}
	for i := range 3 {
		if i != victim {
			check(i)
		}
	}

	phase("every applied write found once")
	// The killed node comes back on its data and catches up.
	r.hubs[victim] = launchHub(t, r.dirs[victim], r.env, r.args[victim]...)
	r.hubs[victim].awaitReady(t, 2*time.Minute)
	check(victim)
	waitUntil(t, 10*time.Second, "the restarted node is reported again", func() (bool, string) {
		c := r.cellOf(t, live, "echo", victimName)
		return c != nil && c["state"] == "Running", fmt.Sprint(c)
	})

	phase("the killed node is back")
	partitionFleet(t, r)
	phase("partition done")
}

// partitionFleet cuts off the node holding bob: it stops acting for the
// seat before the seat's lease ends (its child stops before another node's
// starts), the majority takes the seat, writes tried through the cut node
// are not applied there and land at most once, and after the cut heals it
// catches up and holds nothing.
func partitionFleet(t *testing.T, r *fleetRig) {
	cutNode := r.runsOn("bob")
	if cutNode < 0 {
		t.Fatalf("bob runs on no node: %v", r.seatProcs("bob"))
	}
	other := (cutNode + 1) % 3
	cutName := fmt.Sprintf("n%d", cutNode)
	cutClient, otherClient := r.client(t, cutNode), r.client(t, other)
	old := r.seatProcs("bob")[0].pid

	r.mesh.Isolate(cutNode, true)
	cutAt := time.Now()
	var stopped, moved time.Time
	overlap := false
	waitUntil(t, 3*fleetTTL, "bob moves to the majority", func() (bool, string) {
		ps := r.seatProcs("bob")
		oldAlive := false
		for _, p := range ps {
			oldAlive = oldAlive || p.pid == old
		}
		if !oldAlive && stopped.IsZero() {
			stopped = time.Now()
		}
		if oldAlive && len(ps) > 1 {
			overlap = true
		}
		h := r.fleet(t, other).Holders["bob"]
		on := r.runsOn("bob")
		if moved.IsZero() && (h != "" && h != cutName || on >= 0 && on != cutNode) {
			moved = time.Now()
		}
		return on >= 0 && on != cutNode, fmt.Sprintf("holder %q, children %v", h, ps)
	})
	if overlap {
		t.Fatal("bob's child ran on the cut node and on the majority at once")
	}
	if !stopped.Before(moved) {
		t.Fatalf("the cut node stopped bob's child %s after the cut, after the seat moved at %s", stopped.Sub(cutAt), moved.Sub(cutAt))
	}
	t.Logf("partition: the cut node stopped acting for bob %s after the cut; the seat moved at %s", stopped.Sub(cutAt).Round(10*time.Millisecond), moved.Sub(cutAt).Round(10*time.Millisecond))

	// A write tried through the cut node is not applied; the majority
	// writes on.
	cutTitle, majorityTitle := "cut-"+r.marker, "majority-"+r.marker
	if out, _ := create(cutClient, cutTitle, 3*time.Second); out == "applied" {
		t.Fatal("a write was applied on the node cut off from the majority")
	}
	if out, _ := create(otherClient, majorityTitle, 10*time.Second); out != "applied" {
		t.Fatalf("a write on the majority: %s", out)
	}

	r.mesh.Isolate(cutNode, false)
	waitUntil(t, time.Minute, "the healed node catches up", func() (bool, string) {
		n := titles(t, cutClient)[majorityTitle]
		return n == 1, fmt.Sprint(n)
	})
	waitUntil(t, 20*time.Second, "the healed node sees bob's new holder", func() (bool, string) {
		h := r.fleet(t, cutNode).Holders["bob"]
		return h != "" && h != cutName, h
	})
	if on := r.runsOn("bob"); on == cutNode || len(r.seatProcs("bob")) != 1 {
		t.Fatalf("after the heal bob runs on %d: %v", on, r.seatProcs("bob"))
	}
	for i := range 3 {
		if n := titles(t, r.client(t, i))[cutTitle]; n > 1 {
			t.Fatalf("n%d holds the cut node's write %d times", i, n)
		}
	}
}
