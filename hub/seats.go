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

// Seats a node acts for (CFG-6). A per-role child is the seat's identity
// at its vendor, so a node runs one only for a seat it acts for: alone,
// every seat but those let go. Claiming a seat starts its children;
// letting it go stops them, ends a start in flight and disarms every retry
// they had due.
//
// This is the seam the agent runtime drives: ClaimSeat before a seat's
// mailbox opens, ReleaseSeat when it stops running the seat. A fleet's
// leases (FLT-1) decide the same through the same two calls.

// seatGate says which seats this node acts for. Its lock is a leaf.
type seatGate struct {
	mu sync.Mutex
	// released are the seats this node has let go; every other seat is
	// its own.
	released map[string]bool
}

func newSeatGate() *seatGate { return &seatGate{released: map[string]bool{}} }

// acting reports whether this node acts for seat now.
func (g *seatGate) acting(seat string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.released[seat]
}

func (g *seatGate) claim(seat string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.released, seat)
}

func (g *seatGate) release(seat string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released[seat] = true
}

// ErrNotAgentSeat is ClaimSeat's answer for a seat the company does not
// run as an agent: only agent seats are held.
var ErrNotAgentSeat = errors.New("hub: not an agent seat of the company")

// ClaimSeat makes this node act for seat. The seat's children start from
// the revision in force, and ClaimSeat returns once each has had its first
// start, or StartupWait has passed, so the seat's mailbox opens after its
// children are up.
func (h *Hub) ClaimSeat(ctx context.Context, seat string) error {
	if s, ok := h.Directory().Seat(seat); !ok || s.Kind != authority.SeatAgent {
		return fmt.Errorf("%w: %q", ErrNotAgentSeat, seat)
	}
	h.actFor(seat)
	wait, cancel := context.WithTimeout(ctx, h.opts.StartupWait)
	defer cancel()
	h.servers.awaitSeatStarted(wait, seat)
	return nil
}

// actFor starts acting for a seat.
func (h *Hub) actFor(seat string) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.seats.claim(seat)
	h.servers.reconcileSeat(h.Company(), seat)
	h.log.Info("seat_acting", "seat", seat)
}

// ReleaseSeat stops acting for seat: its children are stopped (a start in
// flight ended, every retry disarmed) before it returns.
func (h *Hub) ReleaseSeat(_ context.Context, seat string) error {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	h.seats.release(seat)
	h.servers.reconcileSeat(h.Company(), seat)
	h.log.Info("seat_let_go", "seat", seat, "reason", "released")
	return nil
}

// HeldSeats lists the agent seats this node acts for now.
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

// awaitSeatStarted waits until none of seat's children is still in its
// first start, or ctx ends.
func (u *supervision) awaitSeatStarted(ctx context.Context, seat string) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		starting := false
		u.mu.Lock()
		for _, s := range u.byName {
			if s.seat == seat && s.inst != nil && s.inst.Status().State == upstream.StateStarting {
				starting = true
			}
		}
		u.mu.Unlock()
		if !starting {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
