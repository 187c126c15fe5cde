package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/upstream"
)

// Seats a node acts for (FLT-1, CFG-6). A per-role child is the seat's
// identity at its vendor, so a node runs one only for a seat it acts for:
// alone, every seat but those let go; in a fleet, the seats it claimed,
// while it proves their leases by its own clock. Claiming a seat starts
// its children; letting it go, or failing to prove its lease, stops them,
// ends a start in flight and disarms every retry they had due.
//
// This is the seam the agent runtime drives alone: ClaimSeat before a
// seat's mailbox opens, ReleaseSeat when it stops running the seat. In a
// fleet the node places seats itself (see fleet.go) and the runtime
// follows what it acts for (FollowSeats).

// seatGate says which seats this node acts for. Its lock is a leaf: it
// calls nothing while holding it but the lease proof, which takes only its
// own.
type seatGate struct {
	leases Leases
	fleet  bool

	mu sync.Mutex
	// released are the seats a node alone has let go; every other seat is
	// its own.
	released map[string]bool
	// claimed are the seats a node of a fleet has claimed and not let go.
	claimed map[string]bool
	// acted is whether each claimed seat was acted for at its last
	// reconcile, to notice its proof running out or coming back.
	acted map[string]bool
	// since is when each claimed seat was claimed.
	since map[string]time.Time
}

func newSeatGate(leases Leases, fleet bool) *seatGate {
	return &seatGate{leases: leases, fleet: fleet, released: map[string]bool{}, claimed: map[string]bool{}, acted: map[string]bool{},
		since: map[string]time.Time{}}
}

// acting reports whether this node acts for seat now.
func (g *seatGate) acting(seat string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.fleet {
		return !g.released[seat]
	}
	return g.claimed[seat] && g.leases.Holds(seat)
}

func (g *seatGate) claim(seat string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.released, seat)
	if g.fleet {
		if !g.claimed[seat] {
			g.since[seat] = time.Now()
		}
		g.claimed[seat] = true
	}
}

// claimedAt is when a node of a fleet claimed seat (zero if it has not).
func (g *seatGate) claimedAt(seat string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.since[seat]
}

func (g *seatGate) release(seat string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.claimed, seat)
	delete(g.acted, seat)
	delete(g.since, seat)
	if !g.fleet {
		g.released[seat] = true
	}
}

// claimedSeats lists the seats a node of a fleet has claimed, sorted.
func (g *seatGate) claimedSeats() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.claimed))
	for seat := range g.claimed {
		out = append(out, seat)
	}
	slices.Sort(out)
	return out
}

// noteActed records whether a seat's reconcile is about to see it acted
// for; a change after this is one flipped reports.
func (g *seatGate) noteActed(seat string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.claimed[seat] {
		g.acted[seat] = g.leases.Holds(seat)
	}
}

// flipped lists the claimed seats whose proof changed since their last
// reconcile, and records the new answer.
func (g *seatGate) flipped() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for seat := range g.claimed {
		now := g.leases.Holds(seat)
		if was, seen := g.acted[seat]; !seen || was != now {
			g.acted[seat] = now
			out = append(out, seat)
		}
	}
	slices.Sort(out)
	return out
}

// ErrNotAgentSeat is ClaimSeat's answer for a seat the company does not
// run as an agent: only agent seats are held under leases.
var ErrNotAgentSeat = errors.New("hub: not an agent seat of the company")

// ClaimSeat makes this node act for seat: in a fleet it takes the seat's
// lease first (state.ErrSeatHeld if another node holds it). The seat's
// children start from the revision in force (an apply landing meanwhile is
// folded in, FLT-4), and ClaimSeat returns once each has had its first
// start, or StartupWait has passed, so the seat's mailbox opens after its
// children are up.
func (h *Hub) ClaimSeat(ctx context.Context, seat string) error {
	if s, ok := h.Directory().Seat(seat); !ok || s.Kind != authority.SeatAgent {
		return fmt.Errorf("%w: %q", ErrNotAgentSeat, seat)
	}
	if f := h.opts.Fleet; f != nil {
		if err := f.Leases.Claim(ctx, seat); err != nil {
			return err
		}
	}
	h.actFor(seat)
	wait, cancel := context.WithTimeout(ctx, h.opts.StartupWait)
	defer cancel()
	h.servers.awaitSeatStarted(wait, seat)
	h.pokeFleet()
	return nil
}

// actFor starts acting for a seat whose lease this node holds.
func (h *Hub) actFor(seat string) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.seats.claim(seat)
	h.seats.noteActed(seat)
	h.servers.reconcileSeat(h.Company(), seat)
	h.log.Info("seat_acting", "seat", seat, "node", h.nodeName())
}

// ReleaseSeat stops acting for seat: its children are stopped (a start in
// flight ended, every retry disarmed) before, in a fleet, its lease is let
// go, so a peer never starts the seat's children while these still run.
func (h *Hub) ReleaseSeat(ctx context.Context, seat string) error {
	h.stopActing(seat, "released")
	if f := h.opts.Fleet; f != nil {
		return f.Leases.Release(ctx, seat)
	}
	return nil
}

// stopActing stops a seat's children and forgets the claim.
func (h *Hub) stopActing(seat, why string) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.seats.release(seat)
	h.servers.reconcileSeat(h.Company(), seat)
	h.log.Info("seat_let_go", "seat", seat, "node", h.nodeName(), "reason", why)
}

// HeldSeats lists the seats this node acts for now: alone, every agent
// seat it has not let go; in a fleet, those it claimed and proves.
func (h *Hub) HeldSeats() []string {
	var out []string
	for _, s := range h.Directory().Seats() {
		if s.Kind == authority.SeatAgent && h.seats.acting(s.Handle) {
			out = append(out, s.Handle)
		}
	}
	slices.Sort(out)
	return out
}

// nodeName is this node's name in its fleet; "this node" alone.
func (h *Hub) nodeName() string {
	if h.opts.Fleet != nil {
		return h.opts.Fleet.Node
	}
	return "this node"
}

// awaitSeatStarted waits until none of seat's children is still in its
// first start, or ctx ends.
func (u *supervision) awaitSeatStarted(ctx context.Context, seat string) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for u.seatStarting(seat) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// seatStarting reports whether one of seat's children is still starting,
// or is being replaced by a reconcile (stopped, its successor not yet
// started). A child held back for a credential has no instance and is not
// waited for (nothing the seat's first turn can use waits on it), and one
// that failed is down, no longer starting.
func (u *supervision) seatStarting(seat string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.replacing[seat] > 0 {
		return true
	}
	for _, s := range u.byName {
		if s.seat == seat && s.inst != nil && s.inst.Status().State == upstream.StateStarting {
			return true
		}
	}
	return false
}

// SeatServersDown lists the seat's per-role servers whose child on this
// node is down or cannot start: a seat's mailbox does not wait on a child
// that failed, so its turn is told instead (FLT-4). Only names: what took
// a child down may quote the child's own output, which is no text for a
// model to read as the hub's.
func (h *Hub) SeatServersDown(seat string) []string {
	u := h.servers
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.byName {
		if s.seat != seat || s.inst == nil {
			continue
		}
		if st := s.inst.Status().State; st == upstream.StateDown || st == upstream.StateFailed {
			out = append(out, s.decl.Name)
		}
	}
	slices.Sort(out)
	return out
}
