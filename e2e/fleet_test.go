package e2e_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
		t.Skip("-short: starts a fleet of three hub processes; it runs in every full test run")
	}
	t.Parallel()
	runFleet(t, newFleetRig(t, false))
}

func TestFleetExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three nats-servers and three hub processes; it runs in every full test run")
	}
	t.Parallel()
	runFleet(t, newFleetRig(t, true))
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
	// MCP-12, FLT-2: one cell per node, from each node's heartbeat, as
	// every node shows it (a node shows another's cell once it has heard
	// its heartbeat).
	for i := range 3 {
		waitUntil(t, 10*time.Second, fmt.Sprintf("a Running cell per node for the shared server on n%d", i), func() (bool, string) {
			var cells []string
			for _, n := range []string{"n0", "n1", "n2"} {
				c := r.cellOf(t, i, "echo", n)
				cells = append(cells, fmt.Sprint(c["state"]))
			}
			return strings.Join(cells, ",") == "Running,Running,Running", strings.Join(cells, ",")
		})
	}

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
	r.kill(t, victim)
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
	// How long that takes is BenchmarkFleetSeatMove's to measure; a move
	// slower than the lease and a heartbeat is told with what the live
	// nodes said meanwhile.
	t.Logf("seat moved %s after kill -9 (lease %s, heartbeat %s); its child ran on the new node %s after", moved.Sub(killed).Round(10*time.Millisecond), fleetTTL, fleetBeat, running.Sub(killed).Round(10*time.Millisecond))
	if moved.Sub(killed) > fleetTTL+fleetBeat {
		for i, h := range r.hubs {
			if i != victim {
				t.Logf("a slow move: n%d's fleet events:\n%s", i, fleetEvents(h.logs()))
			}
		}
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
	r.restart(t, victim)
	check(victim)
	waitUntil(t, 10*time.Second, "the restarted node is reported again", func() (bool, string) {
		c := r.cellOf(t, live, "echo", victimName)
		return c != nil && c["state"] == "Running", fmt.Sprint(c)
	})

	phase("the killed node is back")
	// A fleet of three tolerates one node down at a time: the partition
	// waits until the restarted node's copies have caught up.
	r.settle(t, live)
	phase("the fleet settled")
	partitionFleet(t, r)
	phase("partition done")
}

// BenchmarkFleetSeatMove measures how long a seat takes to move after
// kill -9 of the node holding it, on the embedded fleet (lease 12 s,
// heartbeat 1 s): from the kill until a live node holds the lease
// (s/move, and the slowest of them), and until the seat's child runs
// there (s/child). Each round kills the holder, waits, and starts the
// killed node again. Readings are polled every 100 ms.
func BenchmarkFleetSeatMove(b *testing.B) {
	r := newFleetRig(b, false)
	var move, child, slowest time.Duration
	for i := 0; i < b.N; i++ {
		waitUntil(b, time.Minute, "alice's child on her holder", func() (bool, string) {
			on := r.runsOn("alice")
			return on >= 0 && r.fleet(b, on).Holders["alice"] == fmt.Sprintf("n%d", on), fmt.Sprint(r.seatProcs("alice"))
		})
		victim := r.runsOn("alice")
		live, victimName := (victim+1)%3, fmt.Sprintf("n%d", victim)
		killed := time.Now()
		r.kill(b, victim)
		moved := waitUntil(b, 3*fleetTTL, "alice moves", func() (bool, string) {
			h := r.fleet(b, live).Holders["alice"]
			return h != "" && h != victimName, h
		})
		running := waitUntil(b, 10*time.Second, "alice's child on her new holder", func() (bool, string) {
			on := r.runsOn("alice")
			return on >= 0 && on != victim, fmt.Sprint(r.seatProcs("alice"))
		})
		b.Logf("round %d: seat moved %s after kill -9, its child running %s after", i, moved.Sub(killed).Round(10*time.Millisecond), running.Sub(killed).Round(10*time.Millisecond))
		move += moved.Sub(killed)
		child += running.Sub(killed)
		slowest = max(slowest, moved.Sub(killed))
		r.restart(b, victim)
		r.settle(b, live)
	}
	b.ReportMetric(move.Seconds()/float64(b.N), "s/move")
	b.ReportMetric(child.Seconds()/float64(b.N), "s/child")
	// The slowest move, which issue 27 bounds by lease + 2 heartbeats: the
	// log of every round is cut by the testing package past ten lines.
	b.ReportMetric(slowest.Seconds(), "s/slowest-move")
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
	newHolder := -1
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
		newHolder = on
		return on >= 0 && on != cutNode, fmt.Sprintf("holder %q, children %v", h, ps)
	})
	if overlap {
		t.Fatal("bob's child ran on the cut node and on the majority at once")
	}
	if !stopped.Before(moved) {
		t.Fatalf("the cut node stopped bob's child %s after the cut, after the seat moved at %s", stopped.Sub(cutAt), moved.Sub(cutAt))
	}
	// By the nodes' own logs (one machine, one clock): the cut node had
	// stopped acting for bob — his children stopped, his mailbox closed —
	// before the node now holding him claimed the lapsed lease and opened
	// his mailbox there.
	notActing, ok1 := r.eventAt(cutNode, "seat_not_acting", "bob", cutAt)
	claimed, ok2 := r.eventAt(newHolder, "seat_acting", "bob", cutAt)
	if !ok1 || !ok2 || !notActing.Before(claimed) {
		t.Fatalf("the cut node stopped acting for bob at %v (logged %v); n%d claimed him at %v (logged %v)", notActing, ok1, newHolder, claimed, ok2)
	}
	// The new holder opens bob's mailbox once his child there has had its
	// first start (FLT-4), a moment after the child's process shows: the
	// test waits for the event rather than read the log at once.
	shut, ok1 := r.eventAt(cutNode, "mailbox_closed", "bob", cutAt)
	var opened time.Time
	waitUntil(t, 20*time.Second, "the new holder opens bob's mailbox", func() (bool, string) {
		opened, ok2 = r.eventAt(newHolder, "mailbox_opened", "bob", cutAt)
		return ok2, fmt.Sprintf("n%d", newHolder)
	})
	if !ok1 || !ok2 || !shut.Before(opened) {
		t.Fatalf("the cut node closed bob's mailbox at %v (logged %v); n%d opened it at %v (logged %v)", shut, ok1, newHolder, opened, ok2)
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

// Issue 26, item 4: a node of an embedded fleet started without
// CREWLET_CLUSTER_SECRET does not start: it exits at once saying how to
// set one, before any route port listens.
func TestFleetWithoutARouteSecretIsRefused(t *testing.T) {
	route := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(crewletBinary(t), "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--node", "a", "--cluster-listen", route, "--cluster-peers", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "CREWLET_CLUSTER_SECRET=") })
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "set CREWLET_CLUSTER_SECRET") {
		t.Fatalf("a fleet node without a route secret: %v\n%s", err, out)
	}
	if c, err := net.Dial("tcp", route); err == nil {
		c.Close()
		t.Fatal("the refused node's route port listens")
	}
}
