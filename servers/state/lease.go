package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/crewlet/hub/authority"
)

// Seat leases. In a fleet each agent seat is held by one node at a time,
// under a lease: a key of the lease bucket naming the node, with a TTL the
// holder renews every heartbeat. A node acts for a seat — runs its
// children, writes as it — only while it can prove the lease by its own
// monotonic clock: validUntil = (when the last renewal was sent) + TTL -
// margin. The bucket counts the TTL from when it stored the renewal, which
// is later than when it was sent, so a node that cannot renew (cut off,
// paused, slow) stops acting before its peers may take the seat.
//
// A clock can only stop a node from starting things; it cannot stop a
// write already on its way. So a claim is also appended to the log, under
// the seat's claim key, and every write made as the seat carries the
// position of the claim its writer holds (a Fence): the log stores it only
// while that claim is the seat's newest. A node that lost the seat cannot
// write as it, whatever reaches the log late.

// LeaseOptions configure a node's leases. The zero value works but for
// Node.
type LeaseOptions struct {
	// Node is the holder written on this node's leases.
	Node string
	// TTL is how long a lease lives without a renewal; DefaultLeaseTTL if
	// zero. Whole seconds (JetStream's unit), rounded up.
	TTL time.Duration
	// Renew is how often held leases are renewed: the heartbeat;
	// DefaultHeartbeat if zero.
	Renew time.Duration
	// Margin is taken off every proof: what the holder's and the bucket's
	// clocks may disagree by. TTL/10, at least a second, if zero.
	Margin time.Duration
	Logger *slog.Logger
}

// The production defaults: a heartbeat is 15 s (the base of the restart
// schedule is one heartbeat), and a lease outlives two missed renewals
// plus a JetStream leader election (up to 9 s) with room to spare.
const (
	DefaultHeartbeat = 15 * time.Second
	DefaultLeaseTTL  = 45 * time.Second
)

// EnsureDefaults fills in zero fields.
func (o *LeaseOptions) EnsureDefaults() {
	if o.TTL <= 0 {
		o.TTL = DefaultLeaseTTL
	}
	o.TTL = ttlOf(o.TTL)
	if o.Renew <= 0 {
		o.Renew = DefaultHeartbeat
	}
	if o.Margin <= 0 {
		o.Margin = max(time.Second, o.TTL/10)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem at once.
func (o LeaseOptions) Validate() error {
	var errs []error
	if !nodeName.MatchString(o.Node) {
		errs = append(errs, fmt.Errorf("the node name %q must be 1 to 63 letters, digits, '-' or '_'", o.Node))
	}
	if o.TTL-o.Margin < 2*o.Renew {
		errs = append(errs, fmt.Errorf("a lease of %s (proved for %s after each renewal) must outlive two heartbeats of %s", o.TTL, o.TTL-o.Margin, o.Renew))
	}
	return errors.Join(errs...)
}

const (
	leaseBucket = "CREWLET_LEASES"
	leaseKeys   = "seat."
)

// leaseValue is what a lease key holds.
type leaseValue struct {
	Seat string `json:"seat"`
	Node string `json:"node"`
	// ID tells this claim from any other, so a holder whose renewal
	// landed unacknowledged recognises its own value.
	ID string `json:"id"`
}

// held is a lease this node holds.
type held struct {
	id         string
	rev        uint64 // the bucket's newest revision of it known to be ours
	claim      uint64 // the position of its claim in the log
	validUntil time.Time
	// lapsed: the proof ran out and no renewal has got through since.
	lapsed bool
}

// Leases are one node's seat leases. It owns three goroutines, ended by
// Close: one renews what the node holds every heartbeat, one lets go of a
// lease the moment its proof runs out, and one follows every node's
// leases.
// All methods are safe for concurrent use.
type Leases struct {
	opts   LeaseOptions
	log    *JetStreamLog
	bucket *TTLBucket

	mu      sync.Mutex
	held    map[string]*held
	holders map[string]string // seat -> node, as the bucket says now
	// expiry is poked when a lease is added, so the expiry loop looks at
	// its deadline.
	expiry  chan struct{}
	changed chan struct{}

	stop      context.CancelFunc
	wg        conc.WaitGroup
	closeOnce sync.Once

	// paused skips renewals while set: how a test makes a node that
	// cannot renew for a while.
	paused atomic.Bool
}

// ErrSeatHeld marks a claim of a seat another node holds.
var ErrSeatHeld = errors.New("state: the seat is held by another node")

// OpenLeases opens the fleet's lease bucket on l and starts renewing and
// watching.
func OpenLeases(ctx context.Context, l *JetStreamLog, opts LeaseOptions) (*Leases, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := l.ensureClaims(ctx); err != nil {
		return nil, fmt.Errorf("state: make the log keep seats' claims: %w", err)
	}
	b, err := l.TTLBucket(ctx, leaseBucket)
	if err != nil {
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	ls := &Leases{opts: opts, log: l, bucket: b, held: map[string]*held{}, holders: map[string]string{},
		expiry: make(chan struct{}, 1), changed: make(chan struct{}, 1), stop: stop}
	ls.wg.Go(func() { ls.renewLoop(lctx) })
	ls.wg.Go(func() { ls.expiryLoop(lctx) })
	ls.wg.Go(func() { ls.watchLoop(lctx) })
	return ls, nil
}

// Options are the options in force, defaults filled in.
func (l *Leases) Options() LeaseOptions { return l.opts }

// Changed delivers (coalesced) when a lease this node holds stopped or
// started being proved or was lost, or any node's lease came or went.
func (l *Leases) Changed() <-chan struct{} { return l.changed }

func (l *Leases) notify() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func leaseKey(seat string) string { return leaseKeys + subjectToken(seat) }

// seatOfKey reverses leaseKey.
func seatOfKey(key string) string {
	tok := strings.TrimPrefix(key, leaseKeys)
	if rest, ok := strings.CutPrefix(tok, "="); ok {
		if b, err := hex.DecodeString(rest); err == nil {
			return string(b)
		}
	}
	return tok
}

// Claim takes seat's lease for this node and records the claim in the log.
// It answers nil once the node holds the seat and can prove it; a seat
// another node holds answers ErrSeatHeld.
func (l *Leases) Claim(ctx context.Context, seat string) error {
	if l.Holds(seat) {
		return nil
	}
	prev, err := l.log.lastClaim(ctx, seat)
	if err != nil {
		return fmt.Errorf("state: read seat %s's last claim: %w", seat, err)
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	value, _ := json.Marshal(leaseValue{Seat: seat, Node: l.opts.Node, ID: id})
	sent := time.Now()
	rev, err := l.bucket.Create(ctx, leaseKey(seat), value, l.opts.TTL)
	if errors.Is(err, ErrKeyTaken) {
		return fmt.Errorf("%w: %s", ErrSeatHeld, seat)
	}
	if err != nil {
		return fmt.Errorf("state: take seat %s's lease: %w", seat, err)
	}
	// The claim goes in the log fenced on the claim read before the lease
	// was taken: a claim that slipped in between (a node that held the
	// seat after that read) wins, and this one is given back.
	rec, _ := json.Marshal(record{V: recordVersion, Claim: &claimRecord{Seat: seat, Node: l.opts.Node, Lease: rev}})
	pos, err := l.log.Append(ctx, []Message{{Claim: seat, Data: rec, Fence: &Fence{Seat: seat, Claim: prev}}})
	if err == nil && (len(pos) != 1 || pos[0] == 0) {
		err = errors.New("the log answered no position")
	}
	if err != nil {
		l.giveBack(seat, rev)
		return fmt.Errorf("state: record seat %s's claim in the log: %w", seat, err)
	}
	until := sent.Add(l.opts.TTL - l.opts.Margin)
	if !time.Now().Before(until) {
		// Too slow to prove anything: the lease may lapse before the node
		// could act on it.
		l.giveBack(seat, rev)
		return fmt.Errorf("state: seat %s's claim took longer than its lease can be proved for", seat)
	}
	l.mu.Lock()
	l.held[seat] = &held{id: id, rev: rev, claim: pos[0], validUntil: until}
	l.holders[seat] = l.opts.Node
	l.mu.Unlock()
	l.opts.Logger.Info("seat_claimed", "seat", seat, "lease_revision", rev, "claim_position", pos[0])
	select {
	case l.expiry <- struct{}{}:
	default:
	}
	l.notify()
	return nil
}

// giveBack deletes a lease this node took but will not hold, so the seat
// need not wait out its TTL; if that fails, the TTL frees it.
func (l *Leases) giveBack(seat string, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.Renew)
	defer cancel()
	if err := l.bucket.Delete(ctx, leaseKey(seat), rev); err != nil {
		l.opts.Logger.Debug("state: giving a lease back failed; it expires on its own", "seat", seat, "err", err)
	}
}

// Release lets seat go: from now on this node cannot prove it, and the
// lease is deleted so a peer may claim the seat at once. Whoever acts for
// the seat on this node must have stopped first.
func (l *Leases) Release(ctx context.Context, seat string) error {
	l.mu.Lock()
	h := l.held[seat]
	delete(l.held, seat)
	l.mu.Unlock()
	if h == nil {
		return nil
	}
	l.notify()
	l.opts.Logger.Info("seat_released", "seat", seat)
	rev := h.rev
	for attempt := 1; ; attempt++ {
		err := l.bucket.Delete(ctx, leaseKey(seat), rev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrKeyMoved) || attempt == releaseAttempts {
			return fmt.Errorf("state: delete seat %s's lease (it expires on its own): %w", seat, err)
		}
		// The key moved past the revision this node knew: a renewal in
		// flight when the seat was let go (or one whose answer was lost)
		// may have landed after all, and then the lease is still this
		// node's, at a newer revision, and is deleted there. Anything else
		// — no key, another node's lease — holds nothing of this node's.
		e, err := l.bucket.Get(ctx, leaseKey(seat))
		if errors.Is(err, ErrNoKey) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("state: read seat %s's lease to delete it (it expires on its own): %w", seat, err)
		}
		var v leaseValue
		if json.Unmarshal(e.Value, &v) != nil || v.ID != h.id {
			return nil
		}
		rev = e.Revision
	}
}

// releaseAttempts bounds how often Release deletes a lease that keeps
// moving: a renewal still in flight may move it again between the read
// and the delete.
const releaseAttempts = 5

// Holds reports whether this node can prove seat's lease now, by its own
// monotonic clock (MCP-10, FLT-1).
func (l *Leases) Holds(seat string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[seat]
	return h != nil && time.Now().Before(h.validUntil)
}

// Has reports whether seat's lease may still be this node's: held and
// proved, or held with a proof that ran out and a renewal that may still
// get through. A seat this node Has but does not Hold is one it must not
// act for, and that no other node can have taken yet.
func (l *Leases) Has(seat string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[seat] != nil
}

// Fence is what an append made as seat must carry, while this node proves
// the seat's lease.
func (l *Leases) Fence(seat string) (Fence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[seat]
	if h == nil || !time.Now().Before(h.validUntil) {
		return Fence{}, false
	}
	return Fence{Seat: seat, Claim: h.claim}, true
}

// FenceOp is Options.Fence for a node of a fleet: a seat's own write (an
// agent's turn) is fenced on the seat's claim, and refused before anything
// is appended when this node cannot prove the seat's lease. A person's and
// an operator's writes go through any node.
func (l *Leases) FenceOp(op Op) (*Fence, error) {
	if op.Caller.Kind != authority.KindAgent {
		return nil, nil
	}
	if f, ok := l.Fence(op.Caller.Seat); ok {
		return &f, nil
	}
	return nil, authority.Refuse(authority.Unavailable,
		"Nothing was written: this node does not hold seat %s's lease, and only the node holding a seat writes as it (operation %s). The seat's turns run on the node that holds it.", op.Caller.Seat, op.ID).
		WithData("op_id", string(op.ID))
}

// Held lists the seats this node can prove now, sorted.
func (l *Leases) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var out []string
	for seat, h := range l.held {
		if now.Before(h.validUntil) {
			out = append(out, seat)
		}
	}
	slices.Sort(out)
	return out
}

// Holders maps each seat some node holds to that node, as the bucket said
// last: a hint for placement, never a proof.
func (l *Leases) Holders() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.holders))
	for seat, node := range l.holders {
		out[seat] = node
	}
	return out
}

// Holder asks the bucket which node holds seat now ("" if none), and
// keeps the answer as the seat's hint. The watch behind Holders can fall
// behind — its consumer lives on one server of the fleet, and when that
// server dies the watch is silent until it is made again — so placement
// asks this of a seat whose holder has stopped heartbeating, to see the
// lease lapse within a heartbeat of its TTL whatever the watch does.
func (l *Leases) Holder(ctx context.Context, seat string) (string, error) {
	e, err := l.bucket.Get(ctx, leaseKey(seat))
	if errors.Is(err, ErrNoKey) {
		l.mu.Lock()
		gone := l.holders[seat] != ""
		delete(l.holders, seat)
		l.mu.Unlock()
		if gone {
			l.notify()
		}
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value, &v); err != nil {
		return "", fmt.Errorf("state: seat %s's lease: %w", seat, err)
	}
	l.mu.Lock()
	l.holders[seat] = v.Node
	l.mu.Unlock()
	return v.Node, nil
}

// Close stops renewing and watching, and releases every seat still held so
// peers can take them without waiting out the TTL. Safe to call twice.
func (l *Leases) Close() error {
	l.closeOnce.Do(func() {
		l.stop()
		l.wg.Wait()
		l.mu.Lock()
		seats := make([]string, 0, len(l.held))
		for seat := range l.held {
			seats = append(seats, seat)
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var wg conc.WaitGroup
		for _, seat := range seats {
			wg.Go(func() { _ = l.Release(ctx, seat) })
		}
		wg.Wait()
	})
	return nil
}
