package agent

import (
	"context"
	"slices"
	"time"

	"github.com/crewlet/hub/authority"
)

// Which seats this node runs: alone it claims every agent seat of the
// company (reconcileLoop), in a fleet the leases place them (Place); each
// seat held has a mailbox open (mailbox.go).

// mailbox is one claimed seat's turn loop.
type mailbox struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Place names the seats this node runs now, for a runtime whose seats
// are placed by another owner (Options.Placed). It never blocks: the
// runtime opens and closes the mailboxes on its own goroutine, following
// the latest set named, so a caller's loop is not held while a turn in
// flight is cut.
func (r *Runtime) Place(seats []string) {
	r.mu.Lock()
	r.placed = slices.Clone(seats)
	r.mu.Unlock()
	select {
	case r.placing <- struct{}{}:
	default:
	}
}

// placeLoop follows Place: a seat no longer named has its mailbox closed
// (its turn in flight cut, left running on the log for the next holder),
// a newly named one has its mailbox opened.
func (r *Runtime) placeLoop() {
	for {
		select {
		case <-r.life.Done():
			return
		case <-r.placing:
		}
		r.mu.Lock()
		want := map[string]bool{}
		for _, s := range r.placed {
			want[s] = true
		}
		r.mu.Unlock()
		for _, seat := range r.Held() {
			if !want[seat] {
				r.shut(seat, "this node no longer holds the seat")
			}
		}
		for seat := range want {
			r.open(seat)
		}
	}
}

// reconcileLoop claims agent seats a reloaded company added and lets go
// of those it removed.
func (r *Runtime) reconcileLoop() {
	t := time.NewTicker(r.opts.Reconcile)
	defer t.Stop()
	for {
		select {
		case <-r.life.Done():
			return
		case <-t.C:
			r.reconcileSeats(r.life)
		}
	}
}

func (r *Runtime) reconcileSeats(ctx context.Context) {
	want := map[string]bool{}
	for _, s := range r.opts.Directory().Seats() {
		if s.Kind == authority.SeatAgent {
			want[s.Handle] = true
		}
	}
	for _, seat := range r.Held() {
		if !want[seat] {
			if err := r.Release(ctx, seat); err != nil {
				r.log.Warn("seat_release_failed", "seat", seat, "error", err.Error())
			}
		}
	}
	seats := make([]string, 0, len(want))
	for s := range want {
		seats = append(seats, s)
	}
	slices.Sort(seats)
	for _, seat := range seats {
		if err := r.Claim(ctx, seat); err != nil {
			r.log.Warn("seat_claim_failed", "seat", seat, "error", err.Error())
		}
	}
}

// Held lists the seats whose mailboxes are open here, sorted.
func (r *Runtime) Held() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seats))
	for s := range r.seats {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Claim makes this node run a seat's turns: the hub starts the seat's
// per-role children, and then the seat's mailbox opens, first running
// again any turn of it that never ended. Alone, the runtime claims every
// agent seat itself; in a fleet the leases place the seats (Place).
func (r *Runtime) Claim(ctx context.Context, seat string) error {
	r.mu.Lock()
	_, held := r.seats[seat]
	closed := r.closed
	r.mu.Unlock()
	if held || closed {
		return nil
	}
	if err := r.opts.Hub.ClaimSeat(ctx, seat); err != nil {
		return err
	}
	if r.open(seat) {
		r.log.Info("seat_claimed", "seat", seat)
	}
	return nil
}

// open opens a seat's mailbox unless it is open or the runtime closed;
// it reports whether it opened one.
func (r *Runtime) open(seat string) bool {
	mctx, cancel := context.WithCancel(r.life)
	mb := &mailbox{cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, open := r.seats[seat]; open || r.closed {
		cancel()
		return false
	}
	r.seats[seat] = mb
	r.wg.Go(func() {
		defer close(mb.done)
		r.serveSeat(mctx, seat)
	})
	r.log.Info("mailbox_opened", "seat", seat)
	return true
}

// shut closes a seat's mailbox and waits for it to end; it reports
// whether one was open.
func (r *Runtime) shut(seat, why string) bool {
	r.mu.Lock()
	mb := r.seats[seat]
	delete(r.seats, seat)
	r.mu.Unlock()
	if mb == nil {
		return false
	}
	mb.cancel()
	<-mb.done
	// The runs it left parked go with it: the next holder ends them.
	r.dropRuns(seat)
	r.log.Info("mailbox_closed", "seat", seat, "reason", why)
	return true
}

// Release stops running a seat's turns here (a turn in flight is cut and
// stays running on the log) and has the hub stop its children.
func (r *Runtime) Release(ctx context.Context, seat string) error {
	if !r.shut(seat, "released") {
		return nil
	}
	r.log.Info("seat_released", "seat", seat)
	return r.opts.Hub.ReleaseSeat(ctx, seat)
}
