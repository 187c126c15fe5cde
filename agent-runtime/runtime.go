package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// Runtime runs the turns of the agent seats this node holds.
//
// Ownership: a Runtime owns one goroutine that follows the node's log and
// one mailbox goroutine per claimed seat, which runs that seat's turns one
// at a time; Release ends a seat's, Close ends all of them and is safe to
// call twice. A turn cut short by either stays running on the log and is
// run again, with the same turn key, by whoever claims the seat next.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	models modelCache
	sig    signal

	// life ends when Close starts; every mailbox's context derives from it.
	life    context.Context
	endLife context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	seats map[string]*mailbox
	// running is the turn each seat runs now, by lower-cased handle.
	running map[string]*turn
	// runs are the coding runs parked here, waiting for an answer, by id.
	runs   map[string]*codeRun
	closed bool
	once   sync.Once

	// placed is the latest set of seats Place was told this node runs,
	// and placing wakes the goroutine that follows it (Options.Placed).
	placed  []string
	placing chan struct{}

	// condense rewrites the long texts an episode summary or a monthly
	// compaction reads, made once and shared by every seat's turns (its
	// cache is per text).
	condenseOnce sync.Once
	condense     *Condenser
}

// Options configure a Runtime. Store, Hub and Seat are required.
type Options struct {
	Store *Store
	Hub   Hub
	Feeds []Feed
	// Seat says what a seat runs its turns on; ok false for a seat with
	// no model (its wakes end not_run, saying so).
	Seat func(seat string) (spec SeatSpec, ok bool, err error)
	// Auxiliary is a seat's auxiliary model (models.auxiliary, else its
	// own), which synthesizes its skills; nil or ok false: none.
	Auxiliary func(seat string) (spec ModelSpec, ok bool, err error)
	// Directory is the directory of the revision in force, read per call.
	Directory func() *authority.Directory
	// Company names the company in the seats' instructions.
	Company func() string
	// Budget counts tokens and refuses past a ceiling; nil sets none.
	Budget *Budget
	Logger *slog.Logger
	// MaxRounds bounds a turn's model calls (DefaultMaxRounds if 0);
	// WorkerRounds a delegated worker's (DefaultWorkerRounds if 0).
	MaxRounds    int
	WorkerRounds int
	// RunRounds bounds a coding run's (DefaultRunRounds if 0).
	RunRounds int
	// ModelTimeout bounds one model call (DefaultModelTimeout if 0).
	ModelTimeout time.Duration
	// Reconcile is how often the runtime compares the seats it holds with
	// the company's agent seats (DefaultReconcile if 0).
	Reconcile time.Duration
	// ToolSkills are the tool skills whose guards apply (load_tool_skill).
	ToolSkills []ToolSkill
	// Observer is told of each turn's end and each model call (a node's
	// metrics); nil tells nobody.
	Observer Observer
	// Placed says another owner decides which seats this node runs (a
	// fleet's leases, FLT-1): the runtime then claims no seat of its own
	// and runs the mailboxes of exactly the seats Place last named. The
	// hub already acts for those, so opening or closing one asks nothing
	// of Hub.ClaimSeat or ReleaseSeat.
	Placed bool
}

// SeatSpec is how a seat runs its turns.
type SeatSpec struct {
	Model        ModelSpec
	Instructions string
	// SynthesizeSkills: a delivered turn that worked through several
	// tools may leave a new skill behind (learning.synthesize_skills).
	SynthesizeSkills bool
	// SummarizeEpisodes: a turn's similar prior work is one summary of the
	// recalled turns by the seat's auxiliary model
	// (learning.summarize_episodes).
	SummarizeEpisodes bool
}

// Defaults of Options.
const (
	DefaultMaxRounds    = 16
	DefaultWorkerRounds = 8
	DefaultModelTimeout = 5 * time.Minute
	DefaultReconcile    = 5 * time.Second
)

func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	if o.WorkerRounds <= 0 {
		o.WorkerRounds = DefaultWorkerRounds
	}
	if o.RunRounds <= 0 {
		o.RunRounds = DefaultRunRounds
	}
	if o.ModelTimeout <= 0 {
		o.ModelTimeout = DefaultModelTimeout
	}
	if o.Reconcile <= 0 {
		o.Reconcile = DefaultReconcile
	}
	if o.Budget == nil {
		o.Budget = NewBudget(nil, nil)
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	if o.Directory == nil {
		o.Directory = func() *authority.Directory { return authority.NewDirectory(nil, nil) }
	}
	if o.Company == nil {
		o.Company = func() string { return "" }
	}
}

// mailbox is one claimed seat's turn loop.
type mailbox struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a runtime; Start sets it going.
func New(opts Options) (*Runtime, error) {
	if opts.Store == nil || opts.Hub == nil || opts.Seat == nil {
		return nil, errors.New("agent: a runtime needs a store, a hub and its seats' models")
	}
	opts.ensureDefaults()
	r := &Runtime{opts: opts, log: opts.Logger, seats: map[string]*mailbox{}, running: map[string]*turn{}}
	r.sig.ch = make(chan struct{})
	r.placing = make(chan struct{}, 1)
	r.life, r.endLife = context.WithCancel(context.Background())
	return r, nil
}

// Start marks where the runtime begins reading feeds it never read
// (history before the first start wakes nobody), loads what turns spent
// in the budget's windows, and claims every agent seat of the company.
func (r *Runtime) Start(ctx context.Context) error {
	if err := r.markOrigins(ctx); err != nil {
		return err
	}
	if err := r.loadSpending(); err != nil {
		return err
	}
	r.wg.Go(r.follow)
	if r.opts.Placed {
		r.wg.Go(r.placeLoop)
		return nil
	}
	r.wg.Go(r.reconcileLoop)
	r.reconcileSeats(ctx)
	return nil
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

// markOrigins records, once per feed and on the log, the newest row the
// feed held when the runtime first ran: a hub that had mentions long
// before it ran turns does not answer them all on its first start.
func (r *Runtime) markOrigins(ctx context.Context) error {
	have, err := r.opts.Store.Origins()
	if err != nil {
		return err
	}
	missing := map[string]string{}
	for _, f := range r.opts.Feeds {
		if _, ok := have[f.Name]; ok {
			continue
		}
		last, err := f.Last()
		if err != nil {
			return err
		}
		missing[f.Name] = last
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = r.opts.Store.write(ctx, authority.Caller{Seat: "token:runtime", Kind: authority.KindOperator}, "origin", time.Now(),
		kindOrigin, missing, missing)
	return err
}

// loadSpending counts what ended turns spent in every window still open.
func (r *Runtime) loadSpending() error {
	now := time.Now()
	from := WindowStart("month", now)
	if w := WindowStart("week", now); w.Before(from) {
		from = w
	}
	return r.opts.Store.Spending(from, r.opts.Budget.Load)
}

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

// Close stops every mailbox and the log follower; turns in flight stay
// running on the log. Safe to call twice.
func (r *Runtime) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.endLife()
		r.wg.Wait()
		r.dropRuns("")
		r.models.close()
	})
	return nil
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

// modelCache keeps one client per model spec, so a node's seats share
// connections to a provider.
type modelCache struct {
	mu sync.Mutex
	m  map[ModelSpec]Model
}

func (c *modelCache) get(spec ModelSpec) (Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.m[spec]; ok {
		return m, nil
	}
	m, err := NewModel(spec)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[ModelSpec]Model{}
	}
	c.m[spec] = m
	return m, nil
}

// close lets go of every client's idle connections.
func (c *modelCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.m {
		if cl, ok := m.(interface{ closeIdle() }); ok {
			cl.closeIdle()
		}
	}
	c.m = nil
}
