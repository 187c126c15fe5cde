package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// A fleet's budget (REF-2, FLT-3, issue 27). Every node of a fleet decides
// a ceiling against the company's whole spending, not its own: each
// ceiling's window is one counter in a coordination bucket beside the
// shared log, on disk and replicated as the log is, and a call reserves
// its estimate there with a compare-and-set that also checks the ceiling.
// Two nodes racing for the last room both read the counter, both try to
// write it over the revision they read, and only one write lands; the
// other reads again and is refused. Reservations therefore never pass a
// ceiling together, however many nodes spend.
//
// The bound on overrun. A reservation holds the request's estimated input;
// a call's reply (its output, and any error in the estimate) is only known
// when it returns, and is added then. So a ceiling is passed by at most
// what the model calls in flight at the moment it fills spend beyond their
// reservations: one call per turn running anywhere in the fleet, each at
// most the seat model's output cap plus its input misestimate. Nothing
// else adds to it: no node counts from a stale copy, and a call refused is
// never sent. A node killed mid-call leaves its reservation counted (what
// it may have spent is kept, never forgotten), and a seat that moves keeps
// its window's spending, since the counter is the seat's, not the node's.
//
// A window's counter is made on its first reservation, seeded from what
// the log records as spent in that window so far (ended turns, calls
// outside turns): a node upgraded mid-window, or a ceiling added by a
// reload, starts from the spending already made. It expires a little
// after its window ends.

// BudgetBucket is the coordination bucket the fleet's budget counters
// live in.
const BudgetBucket = "CREWLET_BUDGET"

// tallyWait bounds the round trips of one reservation or settlement.
const tallyWait = 10 * time.Second

// tallyKeep is how long a counter outlives its window.
const tallyKeep = time.Hour

// tally is the shared counters a Budget decides against.
type tally struct {
	b     *state.TTLBucket
	store *Store
	// turn lets this node's writes to the counters go one at a time. A
	// write conditional on a counter's revision that meets another write
	// to it still being stored is refused for now, and sent again a while
	// before the state package gives up: with every caller of every node
	// writing at once, a node's calls met its own other calls' writes on
	// a busy machine until one gave up, and was refused as unavailable.
	// Taking turns leaves only the other nodes' writes to meet.
	turn chan struct{}
}

// errOver marks a reservation a ceiling has no room for.
var errOver = errors.New("agent: the ceiling has no room")

// Share has the budget decide against counters every node of the fleet
// shares (kept in bucket, seeded from store's record of spending) instead
// of this process's own. Call it before the runtime starts.
func (b *Budget) Share(bucket *state.TTLBucket, store *Store) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tally = &tally{b: bucket, store: store, turn: make(chan struct{}, 1)}
}

// window is one counter: a period's window starting at start, for a seat
// or (seat empty) the company.
type window struct {
	period string
	start  time.Time
	seat   string
}

// key names the window's counter: period, start and whose, in the
// characters a bucket's key may hold.
func (w window) key() string {
	who := "company"
	if w.seat != "" {
		who = "seat-" + keySafe(w.seat)
	}
	return fmt.Sprintf("%s.%d.%s", w.period, w.start.Unix(), who)
}

// keySafe keeps a handle that is already a valid key token and hex-encodes
// any other, so two handles never share a counter.
func keySafe(s string) string {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("x%x", s)
		}
	}
	return s
}

// seed is what the log records as spent in the window so far.
func (t *tally) seed(w window) (int64, error) {
	end := windowEnd(w.period, w.start)
	var sum int64
	err := t.store.Spending(w.start, func(seat string, at time.Time, tokens int64) {
		if at.Before(end) && (w.seat == "" || seat == w.seat) {
			sum += tokens
		}
	})
	return sum, err
}

// add adds delta to the window's counter and answers what it held before.
// With limit at or above zero the add is made only if the counter stays
// within it (errOver otherwise); the check and the write are one
// compare-and-set, retried while another writer moves the counter.
func (t *tally) add(ctx context.Context, w window, delta, limit int64) (int64, error) {
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-t.turn }()
	key := w.key()
	ttl := time.Until(windowEnd(w.period, w.start)) + tallyKeep
	for {
		e, err := t.b.Get(ctx, key)
		if errors.Is(err, state.ErrNoKey) {
			base, err := t.seed(w)
			if err != nil {
				return 0, err
			}
			if limit >= 0 && base+delta > limit {
				return base, errOver
			}
			_, err = t.b.Create(ctx, key, []byte(strconv.FormatInt(base+delta, 10)), ttl)
			if errors.Is(err, state.ErrKeyTaken) {
				continue
			}
			return base, err
		}
		if err != nil {
			return 0, err
		}
		used, err := strconv.ParseInt(strings.TrimSpace(string(e.Value)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("agent: budget counter %s holds %q: %w", key, e.Value, err)
		}
		if limit >= 0 && used+delta > limit {
			return used, errOver
		}
		_, err = t.b.Renew(ctx, key, []byte(strconv.FormatInt(used+delta, 10)), ttl, e.Revision)
		if errors.Is(err, state.ErrKeyMoved) {
			continue
		}
		return used, err
	}
}

// spent reads a window's counter (zero when it has none yet).
func (t *tally) spent(ctx context.Context, w window) (int64, error) {
	e, err := t.b.Get(ctx, w.key())
	if errors.Is(err, state.ErrNoKey) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(e.Value)), 10, 64)
}

// reserveShared is Reserve against the shared counters: every ceiling's
// window holds need, or none does.
func (b *Budget) reserveShared(t *tally, seat string, need int64) (func(Usage), *authority.Refusal) {
	now := b.now()
	ctx, cancel := context.WithTimeout(context.Background(), tallyWait)
	defer cancel()
	var held []window
	undo := func() {
		for _, w := range held {
			_, _ = t.add(ctx, w, -need, -1)
		}
	}
	for _, c := range b.ceilings() {
		w := window{period: c.Period, start: WindowStart(c.Period, now), seat: seat}
		if c.Scope == "company" {
			w.seat = ""
		}
		used, err := t.add(ctx, w, need, c.Tokens)
		if err != nil {
			undo()
			if errors.Is(err, errOver) {
				return nil, exhausted(c, used, need, windowEnd(c.Period, w.start))
			}
			return nil, authority.Refuse(authority.Unavailable,
				"The fleet's budget counters did not answer (%v), so the model call was not made and nothing was spent; try again once the fleet's log is reachable.", err)
		}
		held = append(held, w)
	}
	var once sync.Once
	return func(u Usage) {
		once.Do(func() {
			delta := u.Total() - need
			if delta == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), tallyWait)
			defer cancel()
			for _, w := range held {
				// A settlement that cannot be written leaves the
				// reservation standing: the counter errs high, never low
				// by more than this call's reply.
				_, _ = t.add(ctx, w, delta, -1)
			}
		})
	}, nil
}
