package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/crewlet/hub/authority"
)

// Projector turns one kind of operation into changes to the projection.
//
// Apply runs on the node's follower goroutine only, once per operation and
// in log order, with b the batch the change is committed in and r a reader
// that already sees b's earlier writes. It must be deterministic (the same
// op on the same projection makes the same writes and the same result on
// every node), must not write keys starting with ReservedPrefix, must not
// commit or close b, and must not keep b or r after it returns. Projectors
// should not claim unavailable: a recorded answer is final, and nothing the
// operation waits for will change it. Returning an *authority.Refusal refuses
// the operation: its writes to b are discarded and the refusal becomes the
// operation's recorded answer. Any other error is recorded as internal_error.
type Projector interface {
	Name() string
	Apply(b *pebble.Batch, r pebble.Reader, pos uint64, op Op) (result json.RawMessage, err error)
}

// Op is one operation: one call of a tool, and the change it asks for.
type Op struct {
	// ID names the operation. Empty: Write mints one for Tool and Args.
	// Given: it must have been minted for exactly Tool and Args.
	ID OpID
	// Tool and Args are the call as the caller made it (Args without any
	// op_id argument). They decide the operation's identity; Args is not
	// stored in the log, so a projector always sees it empty.
	Tool string
	Args json.RawMessage
	// Kind names the Projector that applies the operation.
	Kind string
	// Payload is what the projector needs, decided by the tool before the
	// write; it is stored in the log.
	Payload json.RawMessage
	// Caller is who made the call, recorded for attribution.
	Caller authority.Caller
	// TurnStart is when the caller's turn (Caller.TurnKey) first wrote, for
	// a seat's call. The first operation of a turn that reaches the
	// projection records it, so a retry of the turn derives the same
	// op_ids even on a node that restarted in between (see TurnStart).
	TurnStart time.Time
	// Scope, if set, is the retry scope TurnStart is the start of instead
	// of Caller.TurnKey: an operator's Idempotency-Key under its
	// credential, whose op_ids are minted at the key's first use.
	Scope string
	// At is when the operation was asked for. Write sets it if zero. It is
	// the time a projector may record: every node sees the same value.
	At time.Time
}

// Outcome is what is known about a write.
type Outcome string

// The three outcomes every write has.
const (
	// Applied: durable in the log at Position, and this node's projection
	// has reached it, so the next read on this node sees it.
	Applied Outcome = "applied"
	// Pending: durable in the log at Position, not yet visible on this node.
	Pending Outcome = "pending"
	// Unknown: the write may or may not have landed; there is no position.
	Unknown Outcome = "unknown"
)

// Answer is the answer a write gets. When Write also returns an error, the
// Outcome says what is known: Unknown (may or may not have landed), Applied
// (landed, as the refusal the error is), or empty (nothing was written).
type Answer struct {
	Outcome  Outcome
	Position uint64 // zero unless Applied or Pending
	OpID     OpID
	// Result is what the projector answered for the operation (Applied only).
	Result json.RawMessage
	// Refusal is set when the projector refused the operation: it landed,
	// and what it landed as is this refusal. Write also returns it as its
	// error.
	Refusal *authority.Refusal
}

// Options configure a Node. The zero value works: an ephemeral node in a
// temporary directory removed by Close, with no projectors.
type Options struct {
	// Dir holds the node's data: the embedded log under Dir/log (unless Log
	// is set) and the projection under Dir/projection.
	Dir    string
	Logger *slog.Logger
	// Projectors apply operations, by Name. Two with one name are an error.
	Projectors []Projector
	// ProjectionWait bounds how long a write waits for this node's
	// projection to reach it before answering pending.
	ProjectionWait time.Duration
	// Log, if set, is used instead of the embedded JetStream log. The node
	// takes it over: Close closes it.
	Log Log
	// Blobs is where the bytes writes carry are kept (see Blobs). Unset:
	// the embedded log's object store when the node opens the embedded
	// log itself, else none, and PutBlob fails.
	Blobs Blobs
	// BlobGrace is how old a blob nothing refers to must be before the
	// node erases it as an orphan, and how often it looks.
	BlobGrace time.Duration
	// Fence, if set, is asked before every append what the operation must
	// be fenced on: nil for an operation no seat's lease guards, or the
	// claim of the seat it is written for. An error refuses the write
	// before anything is appended (a node that cannot prove the seat's
	// lease). A fleet sets it (Leases.FenceOp); one node needs none.
	Fence func(Op) (*Fence, error)
	// Shared says the log is a fleet's, shared with other nodes: another
	// node's ledger may vouch for an operation this one cannot (WR-4).
	Shared bool

	ephemeral bool
}

// DefaultProjectionWait is ProjectionWait's default.
const DefaultProjectionWait = 5 * time.Second

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ProjectionWait <= 0 {
		o.ProjectionWait = DefaultProjectionWait
	}
	if o.BlobGrace <= 0 {
		o.BlobGrace = DefaultBlobGrace
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "crewlet-state-")
		if err != nil {
			return fmt.Errorf("state: temporary data directory: %w", err)
		}
		o.Dir, o.ephemeral = dir, true
	}
	return nil
}

// Node is one node's log, projection and op ledger.
type Node struct {
	opts       Options
	log        Log
	db         *pebble.DB
	projectors map[string]Projector
	logger     *slog.Logger
	blobs      Blobs
	blobMu     sync.Mutex // one eraser at a time

	pos     atomic.Uint64 // last applied position; written by the follower only
	horizon atomic.Int64  // Unix ms: ops minted before it may predate the ledger

	mu      sync.Mutex
	waiters waitHeap
	closed  bool
	users   sync.WaitGroup // callers inside Write/View/Vouches, so Close can wait for them

	stop      context.CancelFunc
	done      chan struct{} // closed when Close begins
	followerW sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the node's projection, starts following the log
// from the last projected position, and returns once the projection has
// caught up with everything the log held when Open began, so every write
// answered before a restart is visible to the first read after it.
func Open(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.EnsureDefaults(); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, logger: opts.Logger, projectors: map[string]Projector{}, done: make(chan struct{})}
	for _, p := range opts.Projectors {
		if _, dup := n.projectors[p.Name()]; dup {
			n.cleanup()
			return nil, fmt.Errorf("state: two projectors named %q", p.Name())
		}
		n.projectors[p.Name()] = p
	}
	n.log, n.blobs = opts.Log, opts.Blobs
	if n.log == nil {
		l, err := OpenJetStream(ctx, filepath.Join(opts.Dir, "log"))
		if err != nil {
			n.cleanup()
			return nil, err
		}
		n.log = l
		if n.blobs == nil {
			if n.blobs, err = l.Blobs(ctx); err != nil {
				n.cleanup()
				return nil, err
			}
		}
	}
	// pebble's own default block cache is 8 MiB: with a tracker of some
	// hundred thousand items it no longer holds even the index blocks of
	// the tables a list walks, and every read paid for reading and
	// decompressing them again. The cache fills only as blocks are read.
	cache := pebble.NewCache(projectionCache)
	popts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{n.logger},
		Cache:              cache,
		LBaseMaxBytes:      projectionBaseLevel,
	}
	// Every write looks its op_id up in the ledger (before it is appended,
	// as it is applied, and a tool's write once more before it decides),
	// and a fresh one is in no table: without a filter each level's table
	// is searched for it, with one most are passed over.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(filepath.Join(opts.Dir, "projection"), popts)
	cache.Unref() // the database holds its own reference
	if err != nil {
		n.cleanup()
		return nil, fmt.Errorf("state: open the projection: %w", err)
	}
	n.db = db
	pos, horizon, err := readMeta(db)
	if err != nil {
		n.cleanup()
		return nil, fmt.Errorf("state: read the projection's position: %w", err)
	}
	n.pos.Store(pos)
	n.horizon.Store(horizon)

	last, err := n.log.Last(ctx)
	if err != nil {
		n.cleanup()
		return nil, fmt.Errorf("state: read the log's last position: %w", err)
	}
	if pos > last {
		// The projection holds writes the log does not: the log was lost or
		// replaced. Replaying would silently forget them, so refuse to start.
		n.cleanup()
		return nil, fmt.Errorf("state: the projection is at position %d but the log ends at %d; the log is not the one this projection was built from", pos, last)
	}
	if pos < last {
		n.logger.Info("state: projection catching up with the log", "from", pos, "to", last)
	}

	fctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	n.followerW.Add(1)
	go n.follow(fctx)

	if err := n.WaitFor(ctx, last); err != nil {
		n.Close()
		return nil, fmt.Errorf("state: projection catching up to position %d: %w", last, err)
	}
	// Only once the projection holds every reference the log did can a blob
	// nothing refers to be told from one whose operation is yet to apply.
	if n.blobs != nil {
		n.followerW.Add(1)
		go n.sweepBlobs(fctx)
	}
	return n, nil
}

// cleanup releases what a failed Open had taken.
func (n *Node) cleanup() {
	if n.db != nil {
		_ = n.db.Close()
	}
	if n.log != nil {
		_ = n.log.Close()
	}
	if n.opts.ephemeral {
		_ = os.RemoveAll(n.opts.Dir)
	}
}

// projectionCache bounds the projection's block cache, in bytes.
const projectionCache = 64 << 20

// projectionBaseLevel is the size of the level pebble compacts its newest
// tables into (pebble's default is 64 MiB). Every write touches several key
// ranges at once (an item, its index rows, its ledger row), so each new
// table spans nearly the whole key space. While the projection fits under
// the base level's size, it all sits in that one level, and every compaction
// into it rewrote the whole projection: compactions grew from 7 % to 28 % of
// the CPU of a create as a store filled to 60,000 items. A small base level
// opens the levels below it early, so a compaction rewrites a small level
// rather than everything. Over five rounds of creates on a fresh store,
// compactions then cost half as much CPU per create from the third round
// on, and a list page about the same (within this machine's noise).
const projectionBaseLevel = 8 << 20

// Close stops the follower, waits for calls in progress, and closes the
// projection and the log. Calling it again returns the first call's error.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		close(n.done)
		n.mu.Unlock()
		n.stop()
		n.followerW.Wait()
		// Closing the log ends appends still waiting for an
		// acknowledgement, so their callers answer and leave.
		logErr := n.log.Close()
		n.users.Wait()
		dbErr := n.db.Close()
		if n.opts.ephemeral {
			_ = os.RemoveAll(n.opts.Dir)
		}
		n.closeErr = errors.Join(logErr, dbErr)
	})
	return n.closeErr
}

// enter registers a caller, or reports that the node is closed.
func (n *Node) enter() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.users.Add(1)
	return true
}

func closedRefusal() error {
	return authority.Refuse(authority.Unavailable, "This node is shutting down and took nothing from this call; nothing was written. Make the call again once the node is back.")
}

// Shared reports whether other nodes share this node's log (a fleet).
func (n *Node) Shared() bool { return n.opts.Shared }

// Position is the last log position this node's projection has applied.
func (n *Node) Position() uint64 { return n.pos.Load() }

// WaitFor returns once the projection has applied position pos, or with
// ctx's error, or with an unavailable refusal if the node closes first.
func (n *Node) WaitFor(ctx context.Context, pos uint64) error {
	if n.pos.Load() >= pos {
		return nil
	}
	n.mu.Lock()
	if n.pos.Load() >= pos {
		n.mu.Unlock()
		return nil
	}
	w := &waiter{pos: pos, ch: make(chan struct{})}
	n.waiters.push(w)
	n.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		n.mu.Lock()
		n.waiters.remove(w)
		n.mu.Unlock()
		return ctx.Err()
	case <-n.done:
		return closedRefusal()
	}
}

// View runs fn on a consistent snapshot of the projection. An error fn
// returns that is a refusal is returned as it is; any other is the node's
// own fault, logged and answered internal_error.
func (n *Node) View(fn func(r pebble.Reader) error) error {
	if !n.enter() {
		return closedRefusal()
	}
	defer n.users.Done()
	snap := n.db.NewSnapshot()
	defer snap.Close()
	err := fn(noCloseReader{snap})
	if err == nil {
		return nil
	}
	var r *authority.Refusal
	if errors.As(err, &r) {
		return err
	}
	n.logger.Error("state: read of the projection failed", "err", err)
	return authority.Internal()
}

// noCloseReader keeps a reader's Close from reaching the snapshot or batch
// the node owns.
type noCloseReader struct{ pebble.Reader }

func (noCloseReader) Close() error { return nil }

// TurnStart is when turn first wrote, as the projection recorded it from
// the first of its operations to land; ok is false when none has yet. turn
// is a seat's turn key or an operation's scope (Op.Scope).
func (n *Node) TurnStart(turn string) (t time.Time, ok bool) {
	if turn == "" || !n.enter() {
		return time.Time{}, false
	}
	defer n.users.Done()
	ms, found, err := readU64(n.db, []byte(turnKey+turn))
	if err != nil {
		n.logger.Error("state: read of a turn's start failed", "turn", turn, "err", err)
		return time.Time{}, false
	}
	if !found {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)), true
}

// OtherCall reports an operation of id's stem that this node's ledger
// holds for another call (another tool or other arguments): a key that
// named one call brought back with a different one (see KeyedOpID). It
// answers the other operation's id; ok is false when the ledger holds no
// such operation, and err when it could not be read.
func (n *Node) OtherCall(id OpID) (other OpID, ok bool, err error) {
	stem := id.Stem()
	if stem == "" {
		return "", false, nil
	}
	if !n.enter() {
		return "", false, closedRefusal()
	}
	defer n.users.Done()
	prefix := ledgerKey + stem + "."
	it, err := n.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix + "\xff")})
	if err != nil {
		return "", false, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if found := OpID(string(it.Key()[len(ledgerKey):])); found != id {
			return found, true, nil
		}
	}
	return "", false, it.Error()
}

// Vouches reports what this node's ledger holds for id. ok true: the answer
// is what the ledger knows — the recorded answer, or (Outcome empty) that
// the operation has not reached this node's projection. ok false: the ledger
// cannot tell, because id was minted before the oldest operation the ledger
// is sure to hold, or because the ledger could not be read; whoever asks
// should look for the operation's effect before writing it again.
func (n *Node) Vouches(id OpID) (Answer, bool) {
	if !n.enter() {
		return Answer{}, false
	}
	defer n.users.Done()
	a, found, err := n.lookup(id)
	if err != nil {
		n.logger.Error("state: read of the op ledger failed", "op_id", id, "err", err)
		return Answer{}, false
	}
	if found {
		return a, true
	}
	return Answer{OpID: id}, n.reaches(id)
}

// reaches reports whether the ledger holds every operation minted when id
// was.
func (n *Node) reaches(id OpID) bool {
	return id.Minted().UnixMilli() >= n.horizon.Load()
}

// lookup reads id's ledger row from the committed projection.
func (n *Node) lookup(id OpID) (Answer, bool, error) {
	row, found, err := getLedger(n.db, id)
	if err != nil || !found {
		return Answer{}, found, err
	}
	return row.answer(id), true, nil
}

// Write makes op durable and answers where it stands. See the package
// documentation for the path a write takes; in short:
//
//   - an op_id that was minted for another call is refused (invalid) before
//     anything is written;
//   - an operation the ledger already holds answers what it answered before,
//     without writing it again;
//   - otherwise it is appended; if the log cannot say whether it was stored
//     the answer is Unknown, with no position, and an *UnknownOutcome
//     error (also when the ledger cannot vouch for an old op_id, which is
//     then not appended at all);
//   - once stored, the write waits (up to ProjectionWait) for this node's
//     projection to apply it and answers Applied with the projector's
//     result, or Pending with the position if the wait ran out.
//
// A refusal recorded by the projector is returned as the error beside an
// Applied answer: the operation landed, as that refusal.
func (n *Node) Write(ctx context.Context, op Op) (Answer, error) {
	if !n.enter() {
		return Answer{OpID: op.ID}, closedRefusal()
	}
	defer n.users.Done()

	if op.ID == "" {
		op.ID = NewOpID(op.Tool, op.Args)
	} else if _, err := CheckOpID(string(op.ID), op.Tool, op.Args); err != nil {
		return Answer{}, err
	}
	if _, ok := n.projectors[op.Kind]; !ok {
		n.logger.Error("state: write of an operation kind no projector applies", "kind", op.Kind, "tool", op.Tool)
		return Answer{}, authority.Internal()
	}

	if a, found, err := n.lookup(op.ID); err != nil {
		n.logger.Error("state: read of the op ledger failed", "op_id", op.ID, "err", err)
		return Answer{}, authority.Internal()
	} else if found {
		return a, refusalErr(a)
	} else if !n.reaches(op.ID) {
		// The operation may have landed before the oldest row this ledger
		// keeps. Appending it again could apply it twice, so do not.
		return Answer{Outcome: Unknown, OpID: op.ID}, &UnknownOutcome{OpID: op.ID, CannotTell: true}
	}

	var fence *Fence
	if n.opts.Fence != nil {
		f, err := n.opts.Fence(op)
		if err != nil {
			return Answer{OpID: op.ID}, err
		}
		fence = f
	}
	if op.At.IsZero() {
		op.At = time.Now().UTC()
	}
	data, err := encodeRecord(op)
	if err != nil {
		n.logger.Error("state: encode an operation", "op_id", op.ID, "err", err)
		return Answer{}, authority.Internal()
	}
	positions, err := n.log.Append(ctx, []Message{{ID: string(op.ID), Data: data, Fence: fence}})
	if err != nil {
		if errors.Is(err, ErrFenced) {
			n.logger.Warn("state: an append for a seat was fenced off: another node claimed the seat", "op_id", op.ID, "seat", fence.Seat)
			return Answer{OpID: op.ID}, authority.Refuse(authority.Unavailable,
				"Nothing was written: seat %s has been claimed by another node since this one took it, and only the seat's holder writes as it (operation %s).", fence.Seat, op.ID).
				WithData("op_id", string(op.ID))
		}
		if errors.Is(err, ErrNotAppended) {
			n.logger.Warn("state: the log refused an append", "op_id", op.ID, "err", err)
			return Answer{OpID: op.ID}, authority.Refuse(authority.Unavailable,
				"Nothing was written: this node's operation log could not take the write (operation %s). Make the same call again shortly.", op.ID).
				WithData("op_id", string(op.ID))
		}
		n.logger.Warn("state: append outcome unknown", "op_id", op.ID, "err", err)
		return Answer{Outcome: Unknown, OpID: op.ID}, &UnknownOutcome{OpID: op.ID}
	}
	if len(positions) != 1 || positions[0] == 0 {
		n.logger.Error("state: the log answered an append without its position", "op_id", op.ID, "positions", positions)
		return Answer{Outcome: Unknown, OpID: op.ID}, &UnknownOutcome{OpID: op.ID}
	}
	pos := positions[0]

	wctx, cancel := context.WithTimeout(ctx, n.opts.ProjectionWait)
	defer cancel()
	if err := n.WaitFor(wctx, pos); err != nil {
		// Durable, just not visible here yet.
		return Answer{Outcome: Pending, Position: pos, OpID: op.ID}, nil
	}
	a, found, err := n.lookup(op.ID)
	if err != nil {
		n.logger.Error("state: read of the op ledger failed", "op_id", op.ID, "err", err)
		return Answer{}, authority.Internal()
	}
	if !found {
		// The log acknowledged a position whose entry is not this
		// operation: a log that breaks its own contract.
		n.logger.Error("state: the acknowledged position does not hold the operation", "op_id", op.ID, "position", pos)
		return Answer{}, authority.Internal()
	}
	return a, refusalErr(a)
}

func refusalErr(a Answer) error {
	if a.Refusal != nil {
		return a.Refusal
	}
	return nil
}

// UnknownOutcome is the error of a write whose fate this node cannot
// state: the log's acknowledgement was lost, or (CannotTell) the operation
// is older than anything the ledger reaches, so it was not appended again.
// It is not a refusal: what to tell the caller depends on the call (which
// tool, a seat's turn or an operator's op_id, what the write would have
// made), and the write kit in package servers says it.
type UnknownOutcome struct {
	OpID       OpID
	CannotTell bool
}

func (e *UnknownOutcome) Error() string {
	if e.CannotTell {
		return fmt.Sprintf("state: this node's ledger cannot tell whether operation %s landed", e.OpID)
	}
	return fmt.Sprintf("state: the outcome of operation %s is unknown", e.OpID)
}

// pebbleLogger sends pebble's own messages to the node's log.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble: fatal: " + msg)
	panic("pebble: " + msg)
}
