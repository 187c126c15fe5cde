package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// A held seat's mailbox: woken when the log moves (follow), it turns each
// of the seat's wakes into a turn, one at a time, in feed order.

// follow wakes every mailbox each time the projection moves, which is
// when a wake row may have arrived. The position is read before the
// mailboxes are woken: a row applied after that read is past it, so the
// next wait returns at once and wakes them again; read after, a row
// landing while they were woken would wait for some later write.
func (r *Runtime) follow() {
	node := r.opts.Store.Node()
	pos := node.Position()
	for {
		if err := node.WaitFor(r.life, pos+1); err != nil {
			return
		}
		pos = node.Position()
		r.sig.fire()
	}
}

// serveSeat is a seat's mailbox: the turns it left running first, then
// every wake for it in feed order, one turn at a time.
func (r *Runtime) serveSeat(ctx context.Context, seat string) {
	// A coding run the seat's last holder left open is not known to have
	// done anything, and is not run again.
	r.endOrphanedRuns(ctx, seat)
	pending, err := r.opts.Store.Running(seat)
	if err != nil {
		r.log.Error("turns_unreadable", "seat", seat, "error", err.Error())
	}
	for _, rec := range pending {
		if ctx.Err() != nil {
			return
		}
		r.log.Info("turn_resumed", "seat", seat, "turn", rec.Key, "reason", "it was running when this seat's last holder stopped")
		r.runTurn(ctx, rec)
	}
	// A hub that was down across a month's end compacts it as the seat
	// opens, before its next wake.
	r.compactEpisodes(ctx, seat)
	names := make([]string, len(r.opts.Feeds))
	for i, f := range r.opts.Feeds {
		names[i] = f.Name
	}
	cursors, err := r.opts.Store.Cursors(seat, names)
	for err != nil {
		r.log.Error("wake_cursor_unreadable", "seat", seat, "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		cursors, err = r.opts.Store.Cursors(seat, names)
	}
	held := map[string]bool{}
	for {
		changed := r.sig.wait()
		stuck := false
		for _, f := range r.opts.Feeds {
			if !r.drain(ctx, seat, f, cursors, held) {
				stuck = true
			}
			if ctx.Err() != nil {
				return
			}
		}
		var retry <-chan time.Time
		if stuck {
			retry = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// drain runs a turn for each of the seat's wakes in one feed after its
// cursor. It reports false when it stopped at a wake it could not start
// (the log refused), which is tried again shortly. A paused seat starts
// nothing: its wake waits where it is, said once on the log (held).
func (r *Runtime) drain(ctx context.Context, seat string, f Feed, cursors map[string]string, held map[string]bool) bool {
	for {
		rows, err := f.Read(cursors[f.Name], 100)
		if err != nil {
			r.log.Warn("wake_feed_unreadable", "feed", f.Name, "seat", seat, "error", err.Error())
			return false
		}
		for _, w := range rows {
			// A seat does not wake itself: a remark of its own naming it
			// would otherwise start a turn after every turn.
			if strings.EqualFold(w.Seat, seat) && !strings.EqualFold(w.By, seat) {
				pause, paused, err := r.opts.Store.Paused(seat)
				if err != nil {
					r.log.Warn("seat_pause_unreadable", "seat", seat, "error", err.Error())
					return false
				}
				if paused {
					if at := f.Name + "/" + w.Cursor; !held[at] {
						held[at] = true
						r.log.Info("wake_held", "seat", seat, "feed", f.Name, "wake", w.Cursor, "paused_by", pause.By.Seat,
							"reason", "the seat is paused; the wake waits until it is resumed")
					}
					return true
				}
				rec, err := r.begin(ctx, f, w)
				if err != nil {
					if ctx.Err() == nil {
						r.log.Warn("turn_not_started", "seat", seat, "feed", f.Name, "wake", w.Cursor, "error", err.Error())
					}
					return false
				}
				r.runTurn(ctx, rec)
				if ctx.Err() != nil {
					return true
				}
			}
			cursors[f.Name] = w.Cursor
		}
		if len(rows) < 100 {
			return true
		}
	}
}

// begin records a wake's turn as started, on the log, before anything of
// it runs: from here a hub killed mid-turn runs it again.
func (r *Runtime) begin(ctx context.Context, f Feed, w servers.Wake) (TurnRecord, error) {
	key := turnKeyFor(f.Name, w.Cursor)
	rec := TurnRecord{Key: key, Seat: w.Seat, Feed: f.Name, Cursor: w.Cursor, Subject: w.Subject, Comment: w.Comment,
		Requester: w.By, Woken: w.At}
	if f.Trigger != nil {
		t, err := f.Trigger(w)
		if err != nil {
			r.log.Warn("trigger_unreadable", "seat", w.Seat, "turn", key, "error", err.Error())
			t = Trigger{About: w.Subject}
		}
		rec.Trigger, rec.TriggerBy, rec.About = t.Text, t.Author, t.About
	}
	a, err := r.opts.Store.write(ctx, seatCaller(rec), key, w.At, kindStarted, map[string]string{"turn": key}, rec)
	if err != nil {
		return TurnRecord{}, err
	}
	if a.Outcome != "applied" && a.Outcome != "pending" {
		return TurnRecord{}, errors.New("the turn's start was not recorded")
	}
	return rec, nil
}

// seatCaller is who a turn's calls are made by: the seat, acting for its
// requester, inside its turn. It is built from the turn alone, so one
// seat's identity never reaches another's turn (BLT-3).
func seatCaller(rec TurnRecord) authority.Caller {
	return authority.Caller{Seat: rec.Seat, Kind: authority.KindAgent, Requester: rec.Requester, TurnKey: rec.Key}
}

// signal is closed and replaced each time it fires, so any number of
// waiters sleep until the next change.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}
