package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/upstream"
)

// A fleet in one test process: every node a hub with its own real leases
// and heartbeats on one real NATS JetStream (a single embedded server: the
// replicated one is the state package's and the e2e suite's to test), the
// seats' children real processes (this test binary as the echo server).

const (
	testBeat = 200 * time.Millisecond
	testTTL  = 2 * time.Second
)

type testNode struct {
	name   string
	hub    *Hub
	leases *state.Leases
	// lapse, while set, makes the node fail to prove any lease, as one
	// whose renewals stopped getting through would.
	lapse atomic.Bool
	down  bool
}

// lapsingLeases is a node's real leases whose proof a test can take away.
type lapsingLeases struct {
	*state.Leases
	n *testNode
}

func (l lapsingLeases) Holds(seat string) bool { return !l.n.lapse.Load() && l.Leases.Holds(seat) }

// fleetCompany has three agent seats, each declaring credentials for the
// per-role echo server, and a person.
func fleetCompany(t testing.TB) *config.Company {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    mcp_env: {echo: {%s: stdio}}
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice}
      - {name: Bob, handle: bob}
      - {name: Carol, handle: carol}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, shared: false, command: %q}
`, benchEchoVar, exe)
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startTestFleet(t *testing.T, manual bool, names ...string) []*testNode {
	t.Helper()
	return startTestFleetWith(t, manual, func(l SeatLeases) SeatLeases { return l }, names...)
}

// startTestFleetWith is startTestFleet with each node's leases as wrap
// makes them.
func startTestFleetWith(t *testing.T, manual bool, wrap func(SeatLeases) SeatLeases, names ...string) []*testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := state.OpenJetStream(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.Close() })
	c := fleetCompany(t)
	var nodes []*testNode
	for _, name := range names {
		n := &testNode{name: name}
		n.leases, err = state.OpenLeases(ctx, js, state.LeaseOptions{Node: name, TTL: testTTL, Renew: testBeat})
		if err != nil {
			t.Fatal(err)
		}
		n.hub, err = New(ctx, Options{Company: c, StartupWait: 10 * time.Second,
			Env:   func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" },
			Fleet: &Fleet{Node: name, Leases: wrap(lapsingLeases{n.leases, n}), Bus: js, Heartbeat: testBeat, ManualSeats: manual, Health: js.Health}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		t.Cleanup(n.stop)
	}
	return nodes
}

// stop stops a node as an operator would: its children first, then its
// leases let go.
func (n *testNode) stop() {
	if n.down {
		return
	}
	n.down = true
	_ = n.hub.Close()
	_ = n.leases.Close()
}

// children is the seats whose child runs on a node.
func (n *testNode) children() map[string]bool {
	out := map[string]bool{}
	if n.down {
		return out
	}
	u := n.hub.servers
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.byName {
		if s.seat != "" && s.inst != nil && s.inst.Status().State == upstream.StateRunning {
			out[s.seat] = true
		}
	}
	return out
}

func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; %s", what, within, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// placed says whether every agent seat runs its child on exactly one live
// node, the node holding its lease, and on no other.
func placed(nodes []*testNode) (bool, string) {
	where := map[string][]string{}
	ok := true
	for _, n := range nodes {
		for seat := range n.children() {
			where[seat] = append(where[seat], n.name)
			if !n.leases.Holds(seat) {
				ok = false
			}
		}
	}
	for _, seat := range []string{"alice", "bob", "carol"} {
		if len(where[seat]) != 1 {
			ok = false
		}
	}
	return ok, fmt.Sprintf("children by seat %v", where)
}

func holderOf(nodes []*testNode, seat string) *testNode {
	for _, n := range nodes {
		if n.children()[seat] {
			return n
		}
	}
	return nil
}

// FLT-1, FLT-2, CFG-6, MCP-12: three nodes place the company's agent seats
// among themselves, each seat's child running only where its lease is
// held; every node's row for the server shows a cell per node; a node that
// stops lets its seats go, they move to the others, and its cell goes to
// Not reported once its heartbeats stop.
func TestFleetPlacesSeatsAndReportsEveryNode(t *testing.T) {
	nodes := startTestFleet(t, false, "a", "b", "c")
	eventually(t, 10*time.Second, "every seat placed once", func() (bool, string) { return placed(nodes) })

	eventually(t, 5*time.Second, "a cell per node", func() (bool, string) {
		rows := nodes[0].hub.serverRows()
		var cells []string
		for _, c := range rows[0].Nodes {
			cells = append(cells, c.Node+"="+c.State)
		}
		// A node the hashing gave no seat runs no child of the server and
		// reads Not started, with no say in the row's state.
		return rows[0].State == rowRunning && len(cells) == 3 && strings.HasPrefix(strings.Join(cells, ","), "a="),
			fmt.Sprintf("%s %v", rows[0].State, cells)
	})
	v := nodes[1].hub.fleetView(context.Background())
	if len(v.Nodes) != 3 || len(v.Holders) != 3 || !state.Settled(v.Streams, 1) {
		t.Fatalf("GET /fleet: %+v", v)
	}

	victim := holderOf(nodes, "alice")
	victim.stop()
	var rest []*testNode
	for _, n := range nodes {
		if n != victim {
			rest = append(rest, n)
		}
	}
	eventually(t, 10*time.Second, "alice moves to a live node", func() (bool, string) { return placed(rest) })
	eventually(t, 10*time.Second, "the stopped node is not reported", func() (bool, string) {
		for _, c := range rest[0].hub.serverRows()[0].Nodes {
			if c.Node == victim.name {
				return c.State == rowNotReported && strings.Contains(c.Reason, "no heartbeat from this node") && c.LastHeard != "", fmt.Sprintf("%+v", c)
			}
		}
		return false, "no cell for it"
	})
}

// staleLeases are real leases whose watch is stuck on a node that died
// holding alice: Holders says so for good, as a watch whose consumer lived
// on the dead node would until it is made again.
type staleLeases struct{ SeatLeases }

func (l staleLeases) Holders() map[string]string {
	h := l.SeatLeases.Holders()
	if _, ok := h["alice"]; !ok {
		h["alice"] = "gone"
	}
	return h
}

// FLT-1: a seat whose holder stopped heartbeating is asked about in the
// bucket itself each heartbeat, so it moves within a heartbeat of its
// lease's TTL even when what the watch says is behind (here: forever).
func TestFleetAsksTheBucketAboutASilentHoldersSeat(t *testing.T) {
	nodes := startTestFleetWith(t, false, func(l SeatLeases) SeatLeases { return staleLeases{l} }, "a")
	eventually(t, 10*time.Second, "every seat placed, alice too", func() (bool, string) { return placed(nodes) })
}

// FLT-1, MCP-10: a node that cannot prove a seat's lease stops the seat's
// child at once and starts nothing for it; once it proves the lease again
// the child starts again. The seat never ran anywhere else meanwhile: no
// peer can take a lease that is still this node's in the bucket.
func TestFleetStopsChildrenWhileTheProofLapses(t *testing.T) {
	nodes := startTestFleet(t, true, "a", "b")
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	if err := a.hub.ClaimSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if !a.children()["alice"] {
		t.Fatal("ClaimSeat returned before the seat's child started")
	}
	a.lapse.Store(true)
	eventually(t, 5*time.Second, "the child stops", func() (bool, string) { return !a.children()["alice"], fmt.Sprint(a.children()) })
	if got := a.hub.HeldSeats(); len(got) != 0 {
		t.Fatalf("held while unproven: %v", got)
	}
	if err := b.hub.ClaimSeat(ctx, "alice"); !errors.Is(err, state.ErrSeatHeld) {
		t.Fatalf("a peer's claim while the lease is still a's: %v", err)
	}
	a.lapse.Store(false)
	eventually(t, 10*time.Second, "the child starts again", func() (bool, string) { return a.children()["alice"], fmt.Sprint(a.children()) })
	if len(b.children()) != 0 {
		t.Fatalf("b runs %v", b.children())
	}
}

// The seat API the agent runtime drives: ClaimSeat takes the lease and
// returns with the seat's children up; a seat held elsewhere and a person
// are refused; ReleaseSeat stops the children before it lets the lease go,
// so the next node's claim starts the one copy there is.
func TestFleetClaimAndReleaseSeat(t *testing.T) {
	nodes := startTestFleet(t, true, "a", "b")
	a, b := nodes[0], nodes[1]
	ctx := context.Background()
	if err := a.hub.ClaimSeat(ctx, "ada"); !errors.Is(err, ErrNotAgentSeat) {
		t.Fatalf("claiming a person: %v", err)
	}
	if err := a.hub.ClaimSeat(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := b.hub.ClaimSeat(ctx, "bob"); !errors.Is(err, state.ErrSeatHeld) {
		t.Fatalf("a second node's claim: %v", err)
	}
	if got := a.hub.HeldSeats(); len(got) != 1 || got[0] != "bob" {
		t.Fatalf("held: %v", got)
	}
	if _, ok := a.hub.SeatRegistry("bob").Resolve("echo"); !ok {
		t.Fatal("bob's child's tools are not in bob's registry")
	}
	if err := a.hub.ReleaseSeat(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if a.children()["bob"] {
		t.Fatal("the child outlived the release")
	}
	if _, ok := a.hub.SeatRegistry("bob").Resolve("echo"); ok {
		t.Fatal("the released seat's tools are still filed")
	}
	if err := b.hub.ClaimSeat(ctx, "bob"); err != nil {
		t.Fatalf("claiming a released seat: %v", err)
	}
	if !b.children()["bob"] || len(a.children()) != 0 {
		t.Fatalf("a runs %v, b runs %v", a.children(), b.children())
	}
	rows := b.hub.serverRows()
	if rows[0].State != rowRunning {
		t.Fatalf("row %+v", rows[0])
	}
}

// Alone, a node acts for every agent seat from the start, as it always
// has; the same seat API lets one go (its child stops, its tools go) and
// takes it back.
func TestAloneNodeActsForEverySeat(t *testing.T) {
	h, err := New(context.Background(), Options{Company: fleetCompany(t), StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{name: "this node", hub: h}
	defer h.Close()
	eventually(t, 10*time.Second, "every agent seat's child", func() (bool, string) {
		c := n.children()
		return len(c) == 3, fmt.Sprint(c)
	})
	if got := strings.Join(h.HeldSeats(), ","); got != "alice,bob,carol" {
		t.Fatalf("held %s", got)
	}
	ctx := context.Background()
	if err := h.ReleaseSeat(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	if n.children()["carol"] {
		t.Fatal("carol's child outlived her release")
	}
	if _, ok := h.SeatRegistry("carol").Resolve("echo"); ok {
		t.Fatal("carol's tools are still filed")
	}
	if err := h.ClaimSeat(ctx, "carol"); err != nil || !n.children()["carol"] {
		t.Fatalf("claimed back: %v, children %v", err, n.children())
	}
	if v := h.fleetView(context.Background()); v.Node != "this node" || len(v.Holders) != 3 {
		t.Fatalf("GET /fleet alone: %+v", v)
	}
}

// follower records what a node's loop tells whoever follows its seats
// (the agent runtime, in hub/serve).
type follower struct {
	mu    sync.Mutex
	seats []string
	told  int
}

func follow(t *testing.T, n *testNode) *follower {
	t.Helper()
	f := &follower{}
	if !n.hub.FollowSeats(func(seats []string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seats, f.told = seats, f.told+1
	}) {
		t.Fatal("a node of a fleet refused a follower")
	}
	return f
}

func (f *follower) runs(seat string) (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.seats, seat), fmt.Sprintf("told %v (%d times)", f.seats, f.told)
}

// FLT-1: the seats a node's loop tells its follower to run are the seats
// it acts for, as placement and the leases move them: placed here, the
// seat is named; its proof running out, it is dropped at once (the
// mailbox must not run turns the log would fence), and named again once
// proved; its node stopping, the node that takes the lease names it.
func TestFleetTellsItsFollowerTheSeatsItActsFor(t *testing.T) {
	nodes := startTestFleet(t, false, "a", "b")
	followers := map[*testNode]*follower{}
	for _, n := range nodes {
		followers[n] = follow(t, n)
	}
	eventually(t, 10*time.Second, "every seat placed once", func() (bool, string) { return placed(nodes) })
	for _, n := range nodes {
		for _, seat := range []string{"alice", "bob", "carol"} {
			want := n.children()[seat]
			eventually(t, 5*time.Second, n.name+" told "+seat+" as it acts", func() (bool, string) {
				got, s := followers[n].runs(seat)
				return got == want, s
			})
		}
	}

	holder := holderOf(nodes, "alice")
	holder.lapse.Store(true)
	eventually(t, 5*time.Second, "alice dropped while unproven", func() (bool, string) {
		got, s := followers[holder].runs("alice")
		return !got, s
	})
	holder.lapse.Store(false)
	eventually(t, 10*time.Second, "alice named again once proved", func() (bool, string) { return followers[holder].runs("alice") })

	holder.stop()
	var other *testNode
	for _, n := range nodes {
		if n != holder {
			other = n
		}
	}
	eventually(t, 10*time.Second, "the other node runs alice", func() (bool, string) { return followers[other].runs("alice") })
	eventually(t, 10*time.Second, "every seat on the other node", func() (bool, string) { return placed([]*testNode{other}) })
}

// Alone, the seats do not move and nobody is told anything.
func TestAloneNodeRefusesAFollower(t *testing.T) {
	h, err := New(context.Background(), Options{Company: fleetCompany(t), StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.FollowSeats(func([]string) { t.Error("a node alone told its follower") }) {
		t.Fatal("a node alone took a follower")
	}
}

// openFleetPair starts nodes a and b of one fleet on an in-process
// JetStream, each a hub on company c with Ada's token, and calls follow
// on each as soon as its hub is up, before the next starts: a follower
// registered then hears every placement, the first one included.
func openFleetPair(t *testing.T, ctx context.Context, c *config.Company, follow func(*testNode)) []*testNode {
	t.Helper()
	return openFleetNodes(t, ctx, Options{Company: c, StartupWait: time.Minute,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }}, follow)
}

// openFleetNodes is openFleetPair with the hubs' options but for the
// fleet, which it sets (the leases, the bus, the fleet's keys and
// buckets; of opts.Fleet only ManualSeats is read), and each node's own
// grant store; each node's log records carry node=<name>.
func openFleetNodes(t *testing.T, ctx context.Context, opts Options, follow func(*testNode)) []*testNode {
	t.Helper()
	js, err := state.OpenJetStream(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.Close() })
	keys, err := js.OpenFleetKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*testNode
	for _, name := range []string{"a", "b"} {
		n := &testNode{name: name}
		if n.leases, err = state.OpenLeases(ctx, js, state.LeaseOptions{Node: name, TTL: testTTL, Renew: testBeat}); err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Fleet = &Fleet{Node: name, Leases: n.leases, Bus: js, Heartbeat: testBeat, Keys: keys, Buckets: js,
			ManualSeats: opts.Fleet != nil && opts.Fleet.ManualSeats}
		if o.Logger != nil {
			o.Logger = o.Logger.With("node", name)
		}
		// Each node has a grant store of its own in its data directory,
		// as serve gives it.
		if o.Grants, err = secrets.OpenGrants(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		if n.hub, err = New(ctx, o); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		t.Cleanup(n.stop)
		follow(n)
	}
	return nodes
}

// placedOn waits until the leases place seat on one of two nodes, and
// answers that node and the other.
func placedOn(t *testing.T, nodes []*testNode, seat string) (holder, other *testNode) {
	t.Helper()
	eventually(t, 10*time.Second, seat+" placed", func() (bool, string) {
		h := nodes[0].leases.Holders()[seat]
		for i, n := range nodes {
			if n.name == h {
				holder, other = n, nodes[1-i]
			}
		}
		return holder != nil, fmt.Sprintf("holders %v", nodes[0].leases.Holders())
	})
	return holder, other
}
