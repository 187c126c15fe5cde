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

	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest/partition"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fleet suite's rig: three hubs, the proxies their routes go through,
// and for an operator's NATS three nats-server processes; and how the
// suite reads them (GET /fleet, GET /mcp-servers, the seats' processes in
// /proc, the items each node projects).

// fleetRig is three hubs and what carries their routes.
type fleetRig struct {
	marker string
	env    []string
	mesh   *partition.Mesh
	dirs   []string
	args   [][]string
	hubs   []*hubProc
}

func newFleetRig(t testing.TB, external bool) *fleetRig {
	return newFleetRigOf(t, external, fleetCompanyDoc)
}

// fleetCompanyDoc is the rig's company: the marker names its children,
// bin is the MCP server they run.
func fleetCompanyDoc(marker, bin string) string {
	return fmt.Sprintf(`units:
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
  - {name: echo, command: %[2]q, env: {WHO: "shared-%[1]s"}, trust: auto}
  - {name: worker, shared: false, command: %[2]q, tool_prefix: worker_, trust: auto}
`, marker, bin)
}

// newFleetRigOf is newFleetRig on the company doc writes, with env added
// to every hub's environment.
func newFleetRigOf(t testing.TB, external bool, doc func(marker, bin string) string, env ...string) *fleetRig {
	var mark [4]byte
	_, _ = rand.Read(mark[:])
	// The routes authenticate as a fleet in production does.
	r := &fleetRig{marker: hex.EncodeToString(mark[:]), env: []string{"E2E_TOKEN=" + e2eToken, "CREWLET_CLUSTER_SECRET=e2e-fleet-route-secret-" + hex.EncodeToString(mark[:])}}
	// Registered first, so it runs last, once every hub has stopped: no
	// child any of them started outlives them (the killed one's included).
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := r.procsMarked()
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("children left running after every hub stopped: %v", left)
				for _, p := range left {
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	bin := buildEverythingServer(t)
	r.env = append(r.env, env...)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc(r.marker, bin)), 0o600); err != nil {
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
	// Registered after the hubs: it runs before they are stopped, while
	// their logs are still there.
	t.Cleanup(func() {
		for i, h := range r.hubs {
			// The seat's server is the shared one's binary under a prefix:
			// every server of the rig files its tools.
			if strings.Contains(h.logs(), `"mcp_server_failed"`) {
				t.Errorf("n%d: a server of the rig failed to file its tools:\n%s", i, h.logs())
			}
		}
		if t.Failed() {
			for i, h := range r.hubs {
				t.Logf("n%d's fleet events:\n%s", i, fleetEvents(h.logs()))
			}
		}
	})
	for _, h := range r.hubs {
		h.awaitReady(t, 2*time.Minute)
	}
	return r
}

// kill ends node i with SIGKILL, and whatever is in its process group.
func (r *fleetRig) kill(t testing.TB, i int) {
	if err := syscall.Kill(-r.hubs[i].cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.hubs[i].cmd.Wait()
	r.hubs[i].stderr.Close()
}

// restart starts node i again on its data directory, and waits until it
// answers.
func (r *fleetRig) restart(t testing.TB, i int) {
	r.hubs[i] = launchHub(t, r.dirs[i], r.env, r.args[i]...)
	r.hubs[i].awaitReady(t, 2*time.Minute)
}

var natsServer struct {
	once sync.Once
	path string
	err  error
}

// startNATSServer runs one nats-server of an operator's cluster, routed
// through the mesh, and answers its client address.
func startNATSServer(t testing.TB, i int, route string, mesh *partition.Mesh) string {
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

// fleetEvents are the lines of a hub's log about seats, leases and the
// fleet: what a failed run is read by.
func fleetEvents(log string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"msg":"seat_`) || strings.Contains(line, `"msg":"fleet_`) || strings.Contains(line, `"msg":"server_restart_held_back"`) ||
			strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// eventAt is when node i's log first says msg about seat at or after
// since; false if it never does.
func (r *fleetRig) eventAt(i int, msg, seat string, since time.Time) (time.Time, bool) {
	for _, line := range strings.Split(r.hubs[i].logs(), "\n") {
		var e struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Seat string    `json:"seat"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != msg || e.Seat != seat || e.Time.Before(since) {
			continue
		}
		return e.Time, true
	}
	return time.Time{}, false
}

// fleetView is GET /fleet.
type fleetView struct {
	Node    string               `json:"node"`
	Holders map[string]string    `json:"holders"`
	Streams []state.StreamHealth `json:"streams"`
}

// settle waits until, as node i sees it, every replicated stream has a
// leader and every other copy is current: a node restarted a moment ago
// has caught up, and the fleet can lose any one node again.
func (r *fleetRig) settle(t testing.TB, i int) {
	waitUntil(t, time.Minute, fmt.Sprintf("the fleet settled, as n%d sees it", i), func() (bool, string) {
		v := r.fleet(t, i)
		return state.Settled(v.Streams, 3), fmt.Sprintf("%+v", v.Streams)
	})
}

func (r *fleetRig) fleet(t testing.TB, i int) fleetView {
	var v fleetView
	r.getJSON(t, i, "/fleet", &v)
	return v
}

func (r *fleetRig) getJSON(t testing.TB, i int, path string, v any) {
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
	return r.procsWith("WHO=" + who + "-" + r.marker + "\x00")
}

// procsMarked finds every process any of the rig's hubs started: the
// shared server's and every seat's.
func (r *fleetRig) procsMarked() []proc { return r.procsWith("-" + r.marker + "\x00") }

func (r *fleetRig) procsWith(want string) []proc {
	var out []proc
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

func (r *fleetRig) client(t testing.TB, i int) *mcp.ClientSession {
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
func titles(t testing.TB, cs *mcp.ClientSession) map[string]int {
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
			out[servers.Unfence(it.Title)]++ // answered fenced as its writer's (WR-10)
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

func waitUntil(t testing.TB, within time.Duration, what string, cond func() (bool, string)) time.Time {
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
func (r *fleetRig) cellOf(t testing.TB, i int, server, node string) map[string]any {
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
