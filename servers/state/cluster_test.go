package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/crewlet/hub/servers/state/statetest/partition"
	"github.com/crewlet/hub/servers/state/statetest/ports"
)

// A fleet in one test process: each node a real NATS server with its own
// store, routed to the others over loopback, JetStream clustered.

type fleetNode struct {
	name string
	dir  string
	// route is the node's route address.
	route string
	log   *JetStreamLog
	node  *Node
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// startFleet starts n nodes at once (a fleet forms only once enough of
// them are up) and opens a state node on each. routes, if set, gives each
// node's peers and advertised address instead of the direct ones.
func startFleet(t testing.TB, n int, routes func(i int, listen []int) (peers []string, advertise string), before ...func(listen []int)) []*fleetNode {
	return startFleetOf(t, n, routes, nil, before...)
}

// startFleetWith starts n nodes routed directly, each node's Cluster
// edited by edit first.
func startFleetWith(t testing.TB, n int, edit func(i int, c *Cluster)) []*fleetNode {
	return startFleetOf(t, n, nil, edit)
}

func startFleetOf(t testing.TB, n int, routes func(i int, listen []int) (peers []string, advertise string), edit func(i int, c *Cluster), before ...func(listen []int)) []*fleetNode {
	t.Helper()
	listen := make([]int, n)
	for i := range listen {
		// A node binds its route port only once it starts, and its
		// peers must be told it first.
		listen[i] = ports.Reserve(t)
	}
	for _, b := range before {
		b(listen)
	}
	nodes := make([]*fleetNode, n)
	errs := make([]error, n)
	var wg conc.WaitGroup
	for i := range n {
		nodes[i] = &fleetNode{name: fmt.Sprintf("n%d", i), dir: t.TempDir(), route: addr(listen[i])}
		wg.Go(func() {
			c := Cluster{Node: nodes[i].name, Listen: addr(listen[i]), Secret: testRouteSecret, Ready: time.Minute}
			if routes != nil {
				c.Peers, c.Advertise = routes(i, listen)
			} else {
				for j := range n {
					if j != i {
						c.Peers = append(c.Peers, addr(listen[j]))
					}
				}
			}
			if edit != nil {
				edit(i, &c)
			}
			errs[i] = nodes[i].open(c)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, fn := range nodes {
			fn.close()
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nodes
}

func (f *fleetNode) open(c Cluster) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := OpenCluster(ctx, f.dir+"/log", c)
	if err != nil {
		return err
	}
	f.log = l
	f.node, err = Open(ctx, Options{Dir: f.dir, Log: l, Projectors: []Projector{notes{}}})
	return err
}

func (f *fleetNode) close() {
	if f.node != nil {
		_ = f.node.Close()
	} else if f.log != nil {
		_ = f.log.Close()
	}
}

// One fleet of three nodes for every test that does not break it (a fleet
// takes seconds to form: its nodes elect a leader).
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: forms a fleet of three nodes (about 20 s); it runs in every full test run")
	}
	nodes := startFleet(t, 3, nil)
	t.Run("SharesOneLog", func(t *testing.T) { testSharesOneLog(t, nodes) })
	t.Run("FinishesAnOperationThroughAnotherNode", func(t *testing.T) { testFinishThroughAnotherNode(t, nodes) })
	t.Run("OneOperationAppendedEverywhereAtOnce", func(t *testing.T) { testSameOpAtOnce(t, nodes) })
	t.Run("FencedAppendsOfOneSeatBackToBack", func(t *testing.T) { testFencedBackToBack(t, nodes) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, nodes) })
	t.Run("TTLBucketsAreShared", func(t *testing.T) { testTTLBucketsShared(t, nodes) })
	t.Run("KeysHandedOnBackToBack", func(t *testing.T) { testKeysHandedOn(t, nodes) })
	t.Run("Health", func(t *testing.T) { testHealth(t, nodes) })
	t.Run("RoutesAdmitOnlyTheFleet", func(t *testing.T) { testRoutesAdmitOnlyTheFleet(t, nodes) })
}

// GET /fleet's streams: the log and the lease bucket each have a leader
// and two current copies on the other nodes, seen alike from every node.
func testHealth(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, fn := range nodes {
		for {
			hs := fn.log.Health(ctx)
			names := map[string]bool{}
			for _, h := range hs {
				names[h.Name] = true
			}
			if !names[streamName] || !names["KV_"+leaseBucket] {
				t.Fatalf("%s reports %+v", fn.name, hs)
			}
			if Settled(hs, 3) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: never settled: %+v", fn.name, hs)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// openBuckets opens the named bucket through every node.
func openBuckets(ctx context.Context, t *testing.T, nodes []*fleetNode, name string) []*TTLBucket {
	t.Helper()
	buckets := make([]*TTLBucket, len(nodes))
	for i, fn := range nodes {
		b, err := fn.node.TTLBucket(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		buckets[i] = b
	}
	return buckets
}

// A fleet's TTL buckets are one per fleet, replicated as the log is: a key
// put through one node (presence in a room) is read through every node,
// and goes on every node when its TTL runs out.
func testTTLBucketsShared(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	buckets := openBuckets(ctx, t, nodes, "TEST_SHARED_ROOMS")
	w, err := buckets[2].Watch(ctx, "room.a1.>")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := buckets[0].Put(ctx, "room.a1.ada", []byte("viewing"), time.Second); err != nil {
		t.Fatal(err)
	}
	for _, b := range buckets {
		// A replica serves the read and may not have the put yet.
		for {
			got, err := b.Entries(ctx, "room.a1.>")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 1 && string(got[0].Value) == "viewing" {
				break
			}
			if len(got) > 1 {
				t.Fatalf("entries %+v", got)
			}
			select {
			case <-ctx.Done():
				t.Fatal("the put never reached every node")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	for {
		e, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("the key never went on %s: %v", nodes[2].name, err)
		}
		if e.Gone {
			break
		}
	}
}

// FLT-1: a key is created, deleted, and created again through the next
// node straight away, as seats are released on one node and claimed on
// another; and every node contends for one key at once. Each write follows
// the one before at once, and none is refused but a create of the key
// while another node holds it: not by the server's answer that the key is
// still busy with the last write (10164), nor by a replica that has not
// yet stored the delete.
func testKeysHandedOn(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buckets := openBuckets(ctx, t, nodes, "TEST_HANDED_ON")
	for round := range 100 {
		from, to := round%len(nodes), (round+1)%len(nodes)
		rev, err := buckets[from].Create(ctx, "seat.ada", []byte(nodes[from].name), time.Hour)
		if err == nil {
			err = buckets[from].Delete(ctx, "seat.ada", rev)
		}
		if err != nil {
			t.Fatalf("round %d: creating and deleting the key through %s: %v", round, nodes[from].name, err)
		}
		if rev, err = buckets[to].Create(ctx, "seat.ada", []byte(nodes[to].name), time.Hour); err != nil {
			t.Fatalf("round %d: the key deleted through %s, created through %s: %v", round, nodes[from].name, nodes[to].name, err)
		}
		if err := buckets[to].Delete(ctx, "seat.ada", rev); err != nil {
			t.Fatalf("round %d: deleting the key through %s: %v", round, nodes[to].name, err)
		}
	}

	var wg conc.WaitGroup
	errs := make([]error, len(nodes))
	taken := make([]int, len(nodes))
	for i, b := range buckets {
		wg.Go(func() {
			for round := range 100 {
				rev, err := b.Create(ctx, "seat.bob", []byte(nodes[i].name), time.Hour)
				if errors.Is(err, ErrKeyTaken) {
					continue
				}
				if err == nil {
					taken[i]++
					err = b.Delete(ctx, "seat.bob", rev)
				}
				if err != nil {
					errs[i] = fmt.Errorf("round %d through %s: %w", round, nodes[i].name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if taken[0]+taken[1]+taken[2] == 0 {
		t.Fatal("no node ever took the contended key")
	}
}

// FLT-3: a fleet shares one log, replicated on three nodes, and each node
// projects it into its own store: a write through one node is read from
// every node's own projection, in the same order.
func testSharesOneLog(t *testing.T, nodes []*fleetNode) {
	if r := nodes[0].log.Replicas(); r != 3 {
		t.Fatalf("replicas %d", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last uint64
	for i, fn := range nodes {
		op := noteOp("note", notePayload{Key: fmt.Sprintf("k%d", i), Value: fn.name})
		op.Caller.Kind = "human"
		a, err := fn.node.Write(ctx, op)
		if err != nil || a.Outcome != Applied {
			t.Fatalf("write through %s: %+v %v", fn.name, a, err)
		}
		last = max(last, a.Position)
	}
	for _, fn := range nodes {
		if err := fn.node.WaitFor(ctx, last); err != nil {
			t.Fatal(err)
		}
		for i, src := range nodes {
			v, writes, found := readNote(t, fn.node, fmt.Sprintf("k%d", i))
			if !found || v != src.name || writes != 1 {
				t.Fatalf("%s reads k%d as %q (%d writes, found %v)", fn.name, i, v, writes, found)
			}
		}
	}
}

// WR-4, OPS-5 across nodes: an operation whose acknowledgement was lost on
// one node is finished through another, whose ledger reaches back, and
// lands once; the first node then answers it from its own ledger.
func testFinishThroughAnotherNode(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := nodes[0], nodes[1]
	op := noteOp("note", notePayload{Key: "once", Value: "v"})
	op.Caller.Kind = "operator"
	op.ID = NewOpID(op.Tool, op.Args)
	// Node a's append lands but its acknowledgement is lost: the log is
	// written directly, as a's own write would have been.
	data, err := encodeRecord(withAt(op))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.log.Append(ctx, []Message{{ID: string(op.ID), Data: data}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.node.Write(ctx, op)
	if err != nil || got.Outcome != Applied {
		t.Fatalf("finishing through b: %+v %v", got, err)
	}
	for _, fn := range nodes {
		if err := fn.node.WaitFor(ctx, got.Position); err != nil {
			t.Fatal(err)
		}
		if _, writes, _ := readNote(t, fn.node, "once"); writes != 1 {
			t.Fatalf("%s projected the operation %d times", fn.name, writes)
		}
		if v, ok := fn.node.Vouches(op.ID); !ok || v.Outcome != Applied || v.Position != got.Position {
			t.Fatalf("%s vouches %+v %v", fn.name, v, ok)
		}
	}
}

// The same operation appended through every node at once (each node of a
// fleet applying the same company, say) is stored once, and every append
// is answered with its position: the server's "in process" answer to all
// but the first is not taken for a refusal.
func testSameOpAtOnce(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 20 {
		m := Message{ID: fmt.Sprintf("op-at-once-%d", round), Data: []byte(fmt.Sprintf("round %d", round))}
		type answer struct {
			pos []uint64
			err error
		}
		answers := make([]answer, 2*len(nodes))
		var wg conc.WaitGroup
		for i := range answers {
			wg.Go(func() {
				pos, err := nodes[i%len(nodes)].log.Append(ctx, []Message{m})
				answers[i] = answer{pos, err}
			})
		}
		wg.Wait()
		var first uint64
		for i, a := range answers {
			if a.err != nil || len(a.pos) != 1 || (first != 0 && a.pos[0] != first) {
				t.Fatalf("round %d, append %d through %s: %v %v; want position %d", round, i, nodes[i%len(nodes)].name, a.pos, a.err, first)
			}
			first = a.pos[0]
		}
	}
}

// FLT-1: appends fenced on one seat's claim follow each other, through one
// node and through several at once, and every one is stored: while one is
// being replicated the server answers the next "wrong last sequence"
// without a sequence (it cannot check the fence yet), which says try again,
// not that the seat moved.
func testFencedBackToBack(t *testing.T, nodes []*fleetNode) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appendAll := func(writers []*fleetNode, each int) {
		t.Helper()
		var wg conc.WaitGroup
		errs := make([]error, len(writers))
		for i, fn := range writers {
			wg.Go(func() {
				for n := range each {
					m := Message{Data: []byte(fmt.Sprintf("%s %d", fn.name, n)), Fence: &Fence{Seat: "crowded"}}
					if _, err := fn.log.Append(ctx, []Message{m}); err != nil {
						errs[i] = fmt.Errorf("append %d through %s: %w", n, fn.name, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	appendAll(nodes[:1], 200)
	appendAll(nodes, 60)
}

func withAt(op Op) Op {
	op.At = time.Now().UTC()
	return op
}

// proxiedFleet starts n nodes whose every route goes through a proxy of
// its own ordered pair, so cut(i) isolates node i.
func proxiedFleet(t testing.TB, n int) (nodes []*fleetNode, cut func(i int, cut bool)) {
	t.Helper()
	var mesh *partition.Mesh
	nodes = startFleet(t, n, func(i int, listen []int) ([]string, string) {
		return mesh.Peers(i), mesh.Dead()
	}, func(listen []int) {
		targets := make([]string, len(listen))
		for i, p := range listen {
			targets[i] = addr(p)
		}
		var err error
		if mesh, err = partition.NewMesh(targets); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mesh.Close)
	})
	return nodes, mesh.Isolate
}
