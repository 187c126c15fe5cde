package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
)

// Runtime runs the turns of the agent seats this node holds.
//
// Ownership: a Runtime owns one goroutine that follows the node's log and
// one mailbox goroutine per claimed seat, which runs that seat's turns one
// at a time; Release ends a seat's, Close ends all of them and is safe to
// call twice. A turn cut short by either stays running on the log and is
// run again, with the same turn key, by whoever claims the seat next. It
// owns too the coding runs answered here, each until it stops next: Close
// waits for them, and Release or Close cuts a seat's (they stay open on
// the log, and its next holder ends them unknown).
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
	runs map[string]*codeRun
	// answering are the holds on runs taken here for an answer and not
	// yet let go (takeAnswered): the runtime's to wait for and to cut.
	answering map[*answerHold]bool
	closed    bool
	// answerTaken, set by tests only, is called as an answer takes a
	// parked run, before the answer is recorded: where a test orders a
	// turn's end, a failing write or the node's stop against an answer.
	answerTaken func(*codeRun)
	once        sync.Once

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
