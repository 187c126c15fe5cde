package state

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sourcegraph/conc"
)

// Keeping leases: the three goroutines a node's Leases own. One renews
// every held lease each heartbeat; one marks a lease unproven the moment
// its proof runs out, apart from the renewals, which may be waiting on a
// server that does not answer; one follows every node's leases.

// renewLoop renews every held lease each heartbeat.
func (l *Leases) renewLoop(ctx context.Context) {
	tick := time.NewTicker(l.opts.Renew)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l.renewAll(ctx)
		}
	}
}

// expiryLoop drops a lease the moment its proof runs out, apart from the
// renewals, which may be waiting on a server that does not answer.
func (l *Leases) expiryLoop(ctx context.Context) {
	deadline := time.NewTimer(time.Hour)
	defer deadline.Stop()
	for {
		deadline.Reset(l.nextDeadline())
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
		case <-l.expiry:
		}
		l.expire()
	}
}

// nextDeadline is how long until the first held lease's proof runs out.
func (l *Leases) nextDeadline() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := time.Hour
	now := time.Now()
	for _, h := range l.held {
		if !h.lapsed {
			next = min(next, h.validUntil.Sub(now))
		}
	}
	return max(next, time.Millisecond)
}

// expire says which leases' proofs have just run out. The lease stays
// this node's in the bucket until it lapses there or another node takes
// it, so it is still renewed: a renewal over the same revision proves it
// again (nobody can have taken it in between), and one that finds the key
// moved loses it for good.
func (l *Leases) expire() {
	l.mu.Lock()
	now := time.Now()
	var lapsed []string
	for seat, h := range l.held {
		if !h.lapsed && !now.Before(h.validUntil) {
			h.lapsed = true
			lapsed = append(lapsed, seat)
		}
	}
	l.mu.Unlock()
	for _, seat := range lapsed {
		l.opts.Logger.Warn("seat_lease_unproven", "seat", seat, "reason", "this node could not renew the lease before its proof ran out; it stops acting for the seat until a renewal gets through")
	}
	if len(lapsed) > 0 {
		l.notify()
	}
}

// renewAll renews every held lease side by side, within one heartbeat.
func (l *Leases) renewAll(ctx context.Context) {
	if l.paused.Load() {
		return
	}
	l.mu.Lock()
	seats := make([]string, 0, len(l.held))
	for seat := range l.held {
		seats = append(seats, seat)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.opts.Renew)
	defer cancel()
	var wg conc.WaitGroup
	for _, seat := range seats {
		wg.Go(func() { l.renew(ctx, seat) })
	}
	wg.Wait()
}

// renew renews one lease over the revision this node last wrote. A
// renewal whose acknowledgement was lost may still have landed: the key
// then holds this node's own value at a newer revision, which is adopted
// and renewed over; any other value means the seat is gone.
func (l *Leases) renew(ctx context.Context, seat string) {
	for attempt := 0; attempt < 2; attempt++ {
		l.mu.Lock()
		h := l.held[seat]
		var id string
		var rev uint64
		if h != nil {
			id, rev = h.id, h.rev
		}
		l.mu.Unlock()
		if h == nil {
			return
		}
		value, _ := json.Marshal(leaseValue{Seat: seat, Node: l.opts.Node, ID: id})
		sent := time.Now()
		next, err := l.bucket.Renew(ctx, leaseKey(seat), value, l.opts.TTL, rev)
		if err == nil {
			l.mu.Lock()
			proved := false
			if cur := l.held[seat]; cur != nil && cur.id == id {
				cur.rev = next
				if until := sent.Add(l.opts.TTL - l.opts.Margin); until.After(cur.validUntil) {
					cur.validUntil = until
				}
				if cur.lapsed && time.Now().Before(cur.validUntil) {
					cur.lapsed, proved = false, true
				}
			}
			l.mu.Unlock()
			if proved {
				l.opts.Logger.Info("seat_lease_proved", "seat", seat, "reason", "a renewal got through over the same revision: nobody took the seat meanwhile")
				l.notify()
			}
			return
		}
		if !errors.Is(err, ErrKeyMoved) {
			// No answer: the proof runs down until a renewal gets through.
			l.opts.Logger.Debug("state: a lease renewal got no answer", "seat", seat, "err", err)
			return
		}
		e, gerr := l.bucket.Get(ctx, leaseKey(seat))
		var v leaseValue
		if gerr == nil {
			_ = json.Unmarshal(e.Value, &v)
		}
		switch {
		case gerr == nil && v.ID == id:
			l.mu.Lock()
			if cur := l.held[seat]; cur != nil && cur.id == id {
				cur.rev = e.Revision
			}
			l.mu.Unlock()
			continue
		case gerr == nil || errors.Is(gerr, ErrNoKey):
			l.mu.Lock()
			if cur := l.held[seat]; cur != nil && cur.id == id {
				delete(l.held, seat)
			}
			l.mu.Unlock()
			l.opts.Logger.Warn("seat_lease_lost", "seat", seat, "reason", "the lease lapsed or another node holds it", "holder", v.Node)
			l.notify()
			return
		default:
			return
		}
	}
}

// watchLoop follows every node's leases into holders, starting over when
// the watch breaks.
func (l *Leases) watchLoop(ctx context.Context) {
	retry := watchRetry(l.opts.Renew)
	for ctx.Err() == nil {
		if err := l.watch(ctx); err != nil && ctx.Err() == nil {
			l.opts.Logger.Debug("state: the lease watch ended; starting it again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry.wait()):
		}
	}
}

// watchRetry is the lease watch's schedule for starting over: never
// slower than a renewal, so holders are known again within one.
func watchRetry(renew time.Duration) doubling {
	return doubling{next: 100 * time.Millisecond, max: renew}
}

func (l *Leases) watch(ctx context.Context) error {
	w, err := l.bucket.Watch(ctx, leaseKeys+">")
	if err != nil {
		return err
	}
	defer w.Stop()
	fresh := map[string]string{}
	synced := false
	for {
		e, err := w.NextMarked(ctx)
		if err != nil {
			return err
		}
		if e.Key == "" {
			synced = true
			l.mu.Lock()
			l.holders = fresh
			l.mu.Unlock()
			l.notify()
			continue
		}
		seat := seatOfKey(e.Key)
		var v leaseValue
		if !e.Gone {
			_ = json.Unmarshal(e.Value, &v)
		}
		if !synced {
			if e.Gone {
				delete(fresh, seat)
			} else {
				fresh[seat] = v.Node
			}
			continue
		}
		l.mu.Lock()
		if e.Gone {
			delete(l.holders, seat)
		} else {
			l.holders[seat] = v.Node
		}
		l.mu.Unlock()
		l.notify()
	}
}
