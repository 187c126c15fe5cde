package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
)

// Ceiling is one line of the company's token budget: every seat's
// spending together (scope company) or each seat's own (scope seat), per
// calendar window in UTC.
type Ceiling struct {
	Scope  string // company or seat
	Period string // hour, day, week or month
	Tokens int64
}

// Periods a ceiling may count over, shortest first.
var Periods = []string{"hour", "day", "week", "month"}

// WindowStart is the start of the calendar window (UTC) t falls in; a
// week starts on Monday.
func WindowStart(period string, t time.Time) time.Time {
	t = t.UTC()
	switch period {
	case "hour":
		return t.Truncate(time.Hour)
	case "day":
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case "week":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "month":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// windowEnd is when the window starting at start turns over.
func windowEnd(period string, start time.Time) time.Time {
	switch period {
	case "hour":
		return start.Add(time.Hour)
	case "day":
		return start.AddDate(0, 0, 1)
	case "week":
		return start.AddDate(0, 0, 7)
	}
	return start.AddDate(0, 1, 0)
}

// spendKey names one counter: a window of a period, for a seat or (seat
// empty) the whole company.
type spendKey struct {
	period string
	start  int64 // Unix seconds
	seat   string
}

// Budget counts the tokens turns spend, per seat and per company window,
// and refuses a model call that would pass a ceiling before anything is
// sent (REF-2 budget_exhausted). It is safe for concurrent use: a call
// reserves its estimate first, so seats calling at once cannot together
// spend past a ceiling they each saw room under.
type Budget struct {
	// ceilings is read per call, so a reloaded company file takes effect
	// at the next call.
	ceilings func() []Ceiling
	now      func() time.Time

	mu   sync.Mutex
	used map[spendKey]int64
	// tally, once Share set it, is the fleet's counters every decision
	// is made against (budget_shared.go); used is then unread.
	tally *tally
}

// NewBudget counts against ceilings; now is the clock (time.Now if nil).
func NewBudget(ceilings func() []Ceiling, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	if ceilings == nil {
		ceilings = func() []Ceiling { return nil }
	}
	return &Budget{ceilings: ceilings, now: now, used: map[spendKey]int64{}}
}

// Spent is what is recorded as spent in one window: a seat's, or with
// seat empty the company's.
func (b *Budget) Spent(seat, period string, at time.Time) int64 {
	b.mu.Lock()
	t := b.tally
	if t == nil {
		defer b.mu.Unlock()
		return b.used[spendKey{period, WindowStart(period, at).Unix(), seat}]
	}
	b.mu.Unlock()
	// A fleet's spending is the shared counter's (zero when it cannot be
	// read); only windows a ceiling names are counted there.
	ctx, cancel := context.WithTimeout(context.Background(), tallyWait)
	defer cancel()
	n, _ := t.spent(ctx, window{period: period, start: WindowStart(period, at), seat: seat})
	return n
}

// Load adds spending recorded before this process started (the log's
// record of ended turns) to the window it fell in.
func (b *Budget) Load(seat string, at time.Time, tokens int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addLocked(seat, at, tokens)
}

func (b *Budget) addLocked(seat string, at time.Time, tokens int64) {
	for _, p := range Periods {
		start := WindowStart(p, at).Unix()
		b.used[spendKey{p, start, seat}] += tokens
		b.used[spendKey{p, start, ""}] += tokens
	}
}

// Reserve decides whether a call needing about need tokens fits every
// ceiling, and if so holds need against them. settle replaces the hold by
// what the call really spent (zero usage for a call that failed before
// spending anything); it must be called once.
func (b *Budget) Reserve(seat string, need int64) (settle func(Usage), refusal *authority.Refusal) {
	b.mu.Lock()
	t := b.tally
	b.mu.Unlock()
	if t != nil {
		return b.reserveShared(t, seat, need)
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.ceilings() {
		who := seat
		if c.Scope == "company" {
			who = ""
		}
		start := WindowStart(c.Period, now)
		used := b.used[spendKey{c.Period, start.Unix(), who}]
		if used+need > c.Tokens {
			return nil, exhausted(c, used, need, windowEnd(c.Period, start))
		}
	}
	b.addLocked(seat, now, need)
	var once sync.Once
	return func(u Usage) {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.addLocked(seat, now, u.Total()-need)
		})
	}, nil
}

// exhausted is the refusal of a call a ceiling has no room for: which
// budget, how much is spent, when its window turns over and how to raise
// it. Nothing was sent.
func exhausted(c Ceiling, used, need int64, turnsOver time.Time) *authority.Refusal {
	whose := "The company's token budget"
	if c.Scope == "seat" {
		whose = "This seat's token budget"
	}
	return authority.Refuse(authority.BudgetExhausted,
		"%s has no room left in its %s window: %d of its %d tokens are spent and the next model call needs about %d more, so it was not made and nothing was spent. The window turns over at %s; wait for it, or raise budget.%s.%s in the company file.",
		whose, c.Period, used, c.Tokens, need, turnsOver.UTC().Format("2006-01-02 15:04 MST"), c.Scope, c.Period).
		WithData("scope", c.Scope).WithData("period", c.Period)
}

// String shows a ceiling as the company file writes it.
func (c Ceiling) String() string { return fmt.Sprintf("budget.%s.%s: %d", c.Scope, c.Period, c.Tokens) }
