package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/crewlet/hub/authority"
)

// openLeases opens a node's leases with short timings, closed with the test.
func openLeases(t testing.TB, fn *fleetNode, ttl, renew time.Duration) *Leases {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := OpenLeases(ctx, fn.log, LeaseOptions{Node: fn.name, TTL: ttl, Renew: renew})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// waitFor polls cond on every change the leases report, and at least every
// 50 ms, until it holds or the deadline passes.
func waitFor(t testing.TB, l *Leases, within time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-l.Changed():
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: not within %s", what, within)
		}
	}
	return time.Now()
}

// halt stops a node's leases as a node that died would: no renewal, no
// release.
func (l *Leases) halt() {
	l.stop()
	l.wg.Wait()
}

func agentOp(seat, key string) Op {
	op := noteOp("note", notePayload{Key: key, Value: seat})
	op.Caller = authority.Caller{Seat: seat, Kind: authority.KindAgent, TurnKey: "turn-" + key}
	return op
}

// FLT-1, MCP-10: a seat is held by one node under a lease the holder
// renews; another node's claim is refused while it lives; a node proves it
// by its own clock and stops proving it before the bucket lets it go; the
// seat then moves, and the old holder can no longer write as the seat: its
// writes are refused before they are appended, and an append carrying its
// old claim is refused by the log itself.
func testLeases(t *testing.T, nodes []*fleetNode) {
	const ttl, renew = 3 * time.Second, 300 * time.Millisecond
	a, b, c := nodes[0], nodes[1], nodes[2]
	la, lb, lc := openLeases(t, a, ttl, renew), openLeases(t, b, ttl, renew), openLeases(t, c, ttl, renew)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := la.Claim(ctx, "scout"); err != nil {
		t.Fatal(err)
	}
	if err := lb.Claim(ctx, "scout"); !errors.Is(err, ErrSeatHeld) {
		t.Fatalf("a second claim: %v", err)
	}
	waitFor(t, lc, 5*time.Second, "c sees a holding the seat", func() bool { return lc.Holders()["scout"] == a.name })

	// Renewed past twice its TTL, still held by a and refused to b.
	time.Sleep(2 * ttl)
	if !la.Holds("scout") || lb.Holds("scout") {
		t.Fatalf("after 2 TTLs: a holds %v, b holds %v", la.Holds("scout"), lb.Holds("scout"))
	}
	if err := lb.Claim(ctx, "scout"); !errors.Is(err, ErrSeatHeld) {
		t.Fatalf("a claim while it is renewed: %v", err)
	}

	// A seat's own writes go through its holder, fenced on its claim, and
	// are refused elsewhere before anything is appended.
	b.node.opts.Fence, a.node.opts.Fence = lb.FenceOp, la.FenceOp
	before, _ := b.log.Last(ctx)
	if _, err := b.node.Write(ctx, agentOp("scout", "by-b")); err == nil || !strings.Contains(authority.AsRefusal(err).Sentence, "does not hold seat scout") {
		t.Fatalf("a write as the seat through a node without its lease: %v", err)
	}
	if last, _ := b.log.Last(ctx); last != before {
		t.Fatalf("the refused write was appended: %d -> %d", before, last)
	}
	if ans, err := a.node.Write(ctx, agentOp("scout", "by-a")); err != nil || ans.Outcome != Applied {
		t.Fatalf("the holder's write: %+v %v", ans, err)
	}
	person := agentOp("scout", "person")
	person.Caller.Kind = authority.KindHuman
	if ans, err := b.node.Write(ctx, person); err != nil || ans.Outcome != Applied {
		t.Fatalf("a person's write through any node: %+v %v", ans, err)
	}
	stale, _ := la.Fence("scout")

	// a cannot renew for a while: it stops proving the lease, and proves it
	// again with the first renewal that gets through before the lease
	// lapses, since nobody can have taken it in between.
	la.paused.Store(true)
	waitFor(t, la, ttl, "a stops proving the lease", func() bool { return !la.Holds("scout") })
	la.paused.Store(false)
	if !la.Has("scout") {
		t.Fatal("a let the lease go while it may still be its own")
	}
	waitFor(t, la, ttl-time.Second, "a proves the lease again", func() bool { return la.Holds("scout") })
	if f, _ := la.Fence("scout"); f != stale {
		t.Fatalf("the claim moved: %+v, was %+v", f, stale)
	}

	// a dies: its proof runs out before the bucket lets the lease go, and
	// only then does the seat move.
	la.halt()
	lost := waitFor(t, la, ttl, "a stops proving the lease", func() bool { return !la.Holds("scout") })
	if !la.Has("scout") {
		t.Fatal("a dropped the lease without hearing it moved")
	}
	gone := waitFor(t, lb, 2*ttl, "the lease lapses", func() bool { _, held := lb.Holders()["scout"]; return !held })
	if !lost.Before(gone) {
		t.Fatalf("a proved the lease until %v, after it lapsed at %v", lost, gone)
	}
	// A claim right after the lapse may still read the old value from a
	// replica that has not seen the lapse yet (the bucket serves reads
	// from replicas): it is refused, and asked again, as placement does
	// every heartbeat.
	waitFor(t, lb, ttl, "b claims the lapsed seat", func() bool { return lb.Claim(ctx, "scout") == nil })
	if ans, err := a.node.Write(ctx, agentOp("scout", "late")); err == nil || ans.Outcome != "" {
		t.Fatalf("the old holder's write: %+v %v", ans, err)
	}
	// Even a write its clock let through would be refused by the log: it
	// carries a's claim, and b's is the seat's newest now.
	data, _ := encodeRecord(withAt(agentOp("scout", "fenced")))
	if _, err := a.log.Append(ctx, []Message{{Data: data, Fence: &stale}}); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrNotAppended) {
		t.Fatalf("an append with the old claim: %v", err)
	}
	a.node.opts.Fence = func(Op) (*Fence, error) { return &stale, nil }
	if _, err := a.node.Write(ctx, agentOp("scout", "fenced")); err == nil || !strings.Contains(authority.AsRefusal(err).Sentence, "claimed by another node") {
		t.Fatalf("a write fenced on the old claim: %v", err)
	}
	if ans, err := b.node.Write(ctx, agentOp("scout", "by-b")); err != nil || ans.Outcome != Applied {
		t.Fatalf("the new holder's write: %+v %v", ans, err)
	}
	for _, k := range []string{"late", "fenced"} {
		if _, _, found := readNote(t, b.node, k); found {
			t.Fatalf("%s landed", k)
		}
	}

	// Asked directly, the bucket names the new holder (once the replica
	// that answers has seen the claim).
	waitFor(t, lc, 10*time.Second, "the bucket names b", func() bool { h, err := lc.Holder(ctx, "scout"); return err == nil && h == b.name })

	// Releasing frees the seat at once, not a TTL later; so does closing:
	// these leases live an hour, far past the test's own deadline.
	lbh, lch := openLeases(t, b, time.Hour, renew), openLeases(t, c, time.Hour, renew)
	if err := lbh.Claim(ctx, "scribe"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, lch, 10*time.Second, "c sees b holding the seat", func() bool { return lch.Holders()["scribe"] == b.name })
	if err := lbh.Release(ctx, "scribe"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, lch, 10*time.Second, "c sees the seat free", func() bool { _, held := lch.Holders()["scribe"]; return !held })
	waitFor(t, lch, 10*time.Second, "c claims the released seat", func() bool { return lch.Claim(ctx, "scribe") == nil })
	_ = lch.Close()
	waitFor(t, lbh, 10*time.Second, "b sees the seat free", func() bool { _, held := lbh.Holders()["scribe"]; return !held })
	waitFor(t, lbh, 10*time.Second, "the bucket names nobody", func() bool { h, err := lbh.Holder(ctx, "scribe"); return err == nil && h == "" })

	// A renewal that lands while the seat is being released (sent before
	// Release let it go, answered after) moves the lease past the revision
	// Release knows; the lease is still this node's, and Release deletes
	// it there rather than leaving it to its hour-long TTL.
	if err := lbh.Claim(ctx, "keeper"); err != nil {
		t.Fatal(err)
	}
	lbh.mu.Lock()
	h := *lbh.held["keeper"]
	lbh.mu.Unlock()
	value, _ := json.Marshal(leaseValue{Seat: "keeper", Node: b.name, ID: h.id})
	if _, err := lbh.bucket.Renew(ctx, leaseKey("keeper"), value, time.Hour, h.rev); err != nil {
		t.Fatal(err)
	}
	if err := lbh.Release(ctx, "keeper"); err != nil {
		t.Fatal(err)
	}
	if err := lc.Claim(ctx, "keeper"); err != nil {
		t.Fatalf("claiming a seat released while its renewal landed: %v", err)
	}
	b.node.opts.Fence, a.node.opts.Fence = nil, nil
}

func TestLeaseOptions(t *testing.T) {
	o := LeaseOptions{Node: "a", TTL: 2500 * time.Millisecond, Renew: 1500 * time.Millisecond}
	o.EnsureDefaults()
	if o.TTL != 3*time.Second || o.Margin != time.Second {
		t.Fatalf("defaults %+v", o)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "two heartbeats") {
		t.Fatalf("a lease proved for 2s with heartbeats of 1.5s: %v", err)
	}
	bad := LeaseOptions{Node: "a b"}
	bad.EnsureDefaults()
	if err := bad.Validate(); err == nil {
		t.Fatal("a node name with a space")
	}
	def := LeaseOptions{Node: "a"}
	def.EnsureDefaults()
	if def.TTL != DefaultLeaseTTL || def.Renew != DefaultHeartbeat || def.Validate() != nil {
		t.Fatalf("production defaults %+v", def)
	}
	for _, seat := range []string{"ada", "Tech_Lead-2", "a.b", "ünï", ""} {
		if got := seatOfKey(leaseKey(seat)); got != seat {
			t.Fatalf("%q round-trips as %q", seat, got)
		}
	}
}

// FLT-1 under a partition: the node holding a seat is cut off from its
// peers (every route of its closed and refused). It stops proving the
// lease before the lease lapses where the others can see it; the seat
// moves to a node the majority can reach; the writes the cut node made as
// the seat are answered unknown while it still proved the lease and
// refused, with nothing written, after; none lands twice, none it was
// refused lands at all, and when the cut heals the node catches up and
// holds nothing.
func TestFleetPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: forms a fleet and waits out a lease; it runs in every full test run")
	}
	// The lease must outlive a JetStream leader election (up to 9 s): the
	// cut node may lead the streams the others renew through.
	const ttl, renew = 12 * time.Second, time.Second
	nodes, cut := proxiedFleet(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	la, lb, lc := openLeases(t, a, ttl, renew), openLeases(t, b, ttl, renew), openLeases(t, c, ttl, renew)
	a.node.opts.Fence, b.node.opts.Fence, c.node.opts.Fence = la.FenceOp, lb.FenceOp, lc.FenceOp
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lc.Claim(ctx, "scout"); err != nil {
		t.Fatal(err)
	}
	if ans, err := c.node.Write(ctx, agentOp("scout", "before")); err != nil || ans.Outcome != Applied {
		t.Fatalf("the holder's write: %+v %v", ans, err)
	}
	stale, _ := lc.Fence("scout")

	type attempt struct {
		key     string
		outcome Outcome
		refused bool
		at      time.Time
	}
	var attempts []attempt
	cut(2, true)
	cutAt := time.Now()
	// The cut node keeps writing as the seat, each write bounded by one
	// heartbeat, until a few writes after it lost the lease.
	stop := make(chan struct{})
	var writer conc.WaitGroup
	writer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("cut-%d", i)
			wctx, wcancel := context.WithTimeout(ctx, renew)
			ans, err := c.node.Write(wctx, agentOp("scout", key))
			wcancel()
			var r *authority.Refusal
			attempts = append(attempts, attempt{key: key, outcome: ans.Outcome, refused: errors.As(err, &r) && ans.Outcome == "", at: time.Now()})
		}
	})
	lost := waitFor(t, lc, 2*ttl, "the cut node stops proving the lease", func() bool { return !lc.Holds("scout") })
	gone := waitFor(t, la, 2*ttl, "the majority sees the lease lapse", func() bool { _, held := la.Holders()["scout"]; return !held })
	close(stop)
	writer.Wait()
	if !lost.Before(gone) {
		t.Fatalf("the cut node proved the lease until %v, after it lapsed at %v", lost, gone)
	}
	for _, at := range attempts {
		if at.outcome == Applied {
			t.Fatalf("a write as the seat was applied on the cut-off node: %+v", at)
		}
	}
	t.Logf("cut at 0; the cut node stopped proving the lease at %s; the lease lapsed at %s", lost.Sub(cutAt), gone.Sub(cutAt))
	var moved *Leases
	waitFor(t, la, 2*ttl, "a node of the majority takes the seat", func() bool {
		for _, l := range []*Leases{la, lb} {
			if l.Claim(ctx, "scout") == nil {
				moved = l
				return true
			}
		}
		return false
	})
	holder := a
	if moved == lb {
		holder = b
	}
	ans, err := holder.node.Write(ctx, agentOp("scout", "after"))
	if err != nil || ans.Outcome != Applied {
		t.Fatalf("the new holder's write: %+v %v", ans, err)
	}
	last := ans.Position
	// Asked who holds the seat, the cut node cannot reach the bucket's
	// leader, so it has no answer: its own replica still holds its old
	// lease, and a node just back from a partition that answered from it
	// would make the seat's real holder give the seat up. If the cut node
	// led the bucket's stream it answers from that replica until it notices
	// it lost its quorum and steps down, which JetStream does within
	// seconds; until then the answer can only be its own old lease.
	waitFor(t, lc, 2*ttl, "the cut node has no answer", func() bool {
		hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
		defer hcancel()
		h, err := lc.Holder(hctx, "scout")
		if err == nil && h != c.name {
			t.Fatalf("the cut node answered that %q holds the seat; %s does", h, holder.name)
		}
		return err != nil
	})
	// A write the cut node begins after it lost the lease is refused at
	// once (one that began before may end after, unknown).
	for _, at := range attempts {
		if at.at.After(lost.Add(renew)) && !at.refused {
			t.Fatalf("%s was tried after the lease was lost and not refused: %+v", at.key, at)
		}
	}

	cut(2, false)
	if err := c.node.WaitFor(ctx, last); err != nil {
		t.Fatalf("the healed node catching up: %v", err)
	}
	// The healed node learns holders from its lease watch, whose consumer
	// stalled with the cut: the client notices only after missed idle
	// heartbeats and starts the watch again, which under a loaded CI run
	// took longer than 10 s (the log had caught up at once). It is bounded
	// as the lease's other moves are.
	waitFor(t, lc, 2*ttl, "the healed node sees the new holder", func() bool { return lc.Holders()["scout"] == holder.name })
	if lc.Holds("scout") || len(lc.Held()) != 0 {
		t.Fatalf("the healed node still holds %v", lc.Held())
	}
	waitFor(t, lc, 2*ttl, "the healed node's renewal finds the lease gone", func() bool { return !lc.Has("scout") })
	// Asked until the stream answers (its leader may still be settling
	// after the heal): the answer must be no.
	data, _ := encodeRecord(withAt(agentOp("scout", "stale")))
	for {
		_, err := c.log.Append(ctx, []Message{{Data: data, Fence: &stale}})
		if errors.Is(err, ErrFenced) {
			break
		}
		if err == nil || !transient(err) || ctx.Err() != nil {
			t.Fatalf("an append with the cut node's claim after the heal: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	final, _ := a.log.Last(ctx)
	for _, fn := range nodes {
		if err := fn.node.WaitFor(ctx, final); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"before", "after"} {
			if _, n, _ := readNote(t, fn.node, k); n != 1 {
				t.Fatalf("%s holds %s %d times", fn.name, k, n)
			}
		}
		for _, at := range attempts {
			_, n, _ := readNote(t, fn.node, at.key)
			if n > 1 || (at.refused && n != 0) {
				t.Fatalf("%s holds %s %d times; it was answered %+v", fn.name, at.key, n, at)
			}
		}
	}
	// The heal cost the seat's holder nothing.
	if !moved.Holds("scout") {
		t.Fatalf("%s gave the seat up after the heal: %v", holder.name, moved.Held())
	}
}
