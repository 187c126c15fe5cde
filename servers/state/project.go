package state

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/segmentio/encoding/json"

	"github.com/crewlet/hub/authority"
)

// ReservedPrefix starts every key the package keeps for itself (position,
// horizon, op ledger). A projector's keys must sort at or after "\x01", so
// they can never overwrite or shadow the bookkeeping they are committed with.
const ReservedPrefix = "\x00"

var (
	keyPosition = []byte("\x00state/position")
	keyHorizon  = []byte("\x00state/horizon")
	ledgerKey   = "\x00state/ledger/"
	turnKey     = "\x00state/turn/" // + turn key -> Unix ms of its first write
)

// record is an Op as stored in the log. Args are not stored: the op_id's
// digest already stands for them, and a call's arguments can be large.
type record struct {
	V         int              `json:"v"`
	ID        OpID             `json:"id"`
	Tool      string           `json:"tool"`
	Kind      string           `json:"kind"`
	Payload   json.RawMessage  `json:"payload,omitempty"`
	Caller    authority.Caller `json:"caller,omitzero"`
	At        time.Time        `json:"at"`
	TurnStart time.Time        `json:"turn_start,omitzero"`
	Scope     string           `json:"scope,omitempty"`
	// Claim is set on a seat's claim instead of everything above but V:
	// it is not an operation, and nothing is projected from it.
	Claim *claimRecord `json:"claim,omitempty"`
}

// claimRecord is a seat's claim as the log keeps it: which node claimed
// it, under which revision of its lease.
type claimRecord struct {
	Seat  string `json:"seat"`
	Node  string `json:"node"`
	Lease uint64 `json:"lease"`
}

const recordVersion = 1

// errClaimEntry marks a log entry that is a seat's claim: it holds no
// operation and changes nothing in the projection.
var errClaimEntry = errors.New("a seat's claim")

// Records and ledger rows are written and read with segmentio's
// encoding/json, as projection rows are (rows.go): every write encodes and
// decodes its record and reads its ledger row, and the standard library
// spent about a tenth of a create's CPU there.
func encodeRecord(op Op) ([]byte, error) {
	return json.Marshal(record{V: recordVersion, ID: op.ID, Tool: op.Tool, Kind: op.Kind, Payload: op.Payload, Caller: op.Caller, At: op.At, TurnStart: op.TurnStart, Scope: op.Scope})
}

func decodeRecord(data []byte) (Op, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return Op{}, err
	}
	if r.V != recordVersion {
		return Op{}, fmt.Errorf("record version %d, this node reads %d", r.V, recordVersion)
	}
	if r.Claim != nil {
		return Op{}, errClaimEntry
	}
	if !r.ID.Valid() {
		return Op{}, fmt.Errorf("malformed op_id %q", r.ID)
	}
	return Op{ID: r.ID, Tool: r.Tool, Kind: r.Kind, Payload: r.Payload, Caller: r.Caller, At: r.At, TurnStart: r.TurnStart, Scope: r.Scope}, nil
}

// ledgerRow is an operation's recorded answer.
type ledgerRow struct {
	Position uint64          `json:"p"`
	Result   json.RawMessage `json:"r,omitempty"`
	Class    authority.Class `json:"c,omitempty"`
	Sentence string          `json:"s,omitempty"`
	Data     map[string]any  `json:"d,omitempty"`
}

func (row ledgerRow) answer(id OpID) Answer {
	a := Answer{Outcome: Applied, Position: row.Position, OpID: id, Result: row.Result}
	if row.Class != "" {
		a.Refusal = &authority.Refusal{Class: row.Class, Sentence: row.Sentence, Data: row.Data}
		a.Result = nil
	}
	return a
}

func getLedger(r pebble.Reader, id OpID) (ledgerRow, bool, error) {
	v, closer, err := r.Get([]byte(ledgerKey + string(id)))
	if errors.Is(err, pebble.ErrNotFound) {
		return ledgerRow{}, false, nil
	}
	if err != nil {
		return ledgerRow{}, false, err
	}
	defer closer.Close()
	var row ledgerRow
	if err := json.Unmarshal(v, &row); err != nil {
		return ledgerRow{}, false, fmt.Errorf("ledger row of %s: %w", id, err)
	}
	return row, true, nil
}

// readU64 reads one of the node's own big-endian counters.
func readU64(r pebble.Reader, k []byte) (v uint64, found bool, err error) {
	b, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(b) != 8 {
		return 0, false, fmt.Errorf("%q holds %d bytes, not 8", k, len(b))
	}
	return binary.BigEndian.Uint64(b), true, nil
}

func readMeta(r pebble.Reader) (pos uint64, horizon int64, err error) {
	if pos, _, err = readU64(r, keyPosition); err != nil {
		return 0, 0, err
	}
	h, _, err := readU64(r, keyHorizon)
	return pos, int64(h), err
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// follow is the node's one follower goroutine: it applies the log to the
// projection until the node closes. A failure of the log or of the
// projection's own store stops nothing for good: it is logged and following
// resumes from the last committed position, so no entry is skipped.
func (n *Node) follow(ctx context.Context) {
	defer n.followerW.Done()
	retry := followRetry()
	for ctx.Err() == nil {
		err := n.log.Follow(ctx, n.pos.Load()+1, n.apply)
		if ctx.Err() != nil {
			return
		}
		n.logger.Error("state: following the log stopped; resuming", "position", n.pos.Load(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry.wait()):
		}
	}
}

// followRetry is the follower's schedule for starting over: soon after a
// blip, and no more than every 5 s against a log that stays down.
func followRetry() doubling { return doubling{next: 50 * time.Millisecond, max: 5 * time.Second} }

// apply projects one log entry. Only an error of the projection's own store
// is returned (and makes follow retry the entry); whatever is wrong with the
// entry or its operation is recorded and passed over, so one bad operation
// cannot hold up every operation after it.
func (n *Node) apply(e Entry) error {
	cur := n.pos.Load()
	if e.Position <= cur {
		return nil // delivered again after a resumed follow
	}
	b := n.db.NewIndexedBatch()
	defer func() { b.Close() }()

	op, decErr := decodeRecord(e.Data)
	horizon := n.horizon.Load()
	if e.Position > cur+1 {
		// The log no longer holds what came before this entry, so the ledger
		// cannot hold it either: ops minted before now may have landed in
		// the part that is gone.
		h := time.Now()
		if decErr == nil {
			h = op.At
		}
		n.logger.Warn("state: the log has a gap; the op ledger cannot vouch for operations minted before it", "after", cur, "next", e.Position, "horizon", h)
		if ms := h.UnixMilli(); ms > horizon {
			horizon = ms
		}
	}

	switch {
	case errors.Is(decErr, errClaimEntry):
		// Fences are checked by the log itself; the projection only moves
		// past a claim.
	case decErr != nil:
		n.logger.Error("state: a log entry is not an operation this node reads; passing over it", "position", e.Position, "err", decErr)
	default:
		_, seen, err := getLedger(b, op.ID)
		if err != nil {
			return err
		}
		if seen {
			// The same operation appended again (a retry past the log's
			// duplicate window): it landed already, so it lands once.
			break
		}
		row, fresh := n.project(b, e.Position, op)
		if fresh != nil {
			b.Close()
			b = fresh
		}
		v, err := json.Marshal(row)
		if err != nil {
			return err
		}
		if err := b.Set([]byte(ledgerKey+string(op.ID)), v, nil); err != nil {
			return err
		}
		// Recorded whether the operation landed or was refused: either
		// way the turn wrote, and its retry must mint the same ids.
		if err := recordTurn(b, op); err != nil {
			return err
		}
	}
	// The horizon is written after the projector ran, so the reserved-key
	// check sees only the projector's own writes.
	if horizon != n.horizon.Load() {
		if err := b.Set(keyHorizon, u64(uint64(horizon)), nil); err != nil {
			return err
		}
	}
	if err := b.Set(keyPosition, u64(e.Position), nil); err != nil {
		return err
	}
	// NoSync: the log is the durable copy. After a crash pebble recovers a
	// prefix of its commits, each carrying its own position, and follow
	// replays the rest.
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	n.horizon.Store(horizon)
	n.advance(e.Position)
	return nil
}

// recordTurn keeps when a seat's turn (or an operator's key, op.Scope)
// first wrote, if this is the first of its operations to land.
func recordTurn(b *pebble.Batch, op Op) error {
	scope := op.Scope
	if scope == "" {
		scope = op.Caller.TurnKey
	}
	if scope == "" || op.TurnStart.IsZero() {
		return nil
	}
	k := []byte(turnKey + scope)
	if _, found, err := readU64(b, k); err != nil || found {
		return err
	}
	return b.Set(k, u64(uint64(op.TurnStart.UnixMilli())), nil)
}

// project runs op's projector. It returns the ledger row to record and, when
// the projector's writes must be thrown away, a fresh batch to commit
// instead.
func (n *Node) project(b *pebble.Batch, pos uint64, op Op) (row ledgerRow, fresh *pebble.Batch) {
	row.Position = pos
	refuse := func(err error) (ledgerRow, *pebble.Batch) {
		r := authority.AsRefusal(err)
		if r.Class == authority.InternalError {
			n.logger.Error("state: projector failed; the operation is recorded as refused", "kind", op.Kind, "op_id", op.ID, "position", pos, "err", err)
		}
		row.Class, row.Sentence, row.Data = r.Class, r.Sentence, r.Data
		return row, n.db.NewIndexedBatch()
	}
	p, ok := n.projectors[op.Kind]
	if !ok {
		return refuse(fmt.Errorf("no projector for kind %q", op.Kind))
	}
	result, err := safeApply(p, b, pos, op)
	if err != nil {
		return refuse(err)
	}
	if err := checkKeys(b); err != nil {
		return refuse(fmt.Errorf("projector %q: %w", op.Kind, err))
	}
	if len(result) > 0 && !json.Valid(result) {
		return refuse(fmt.Errorf("projector %q answered a result that is not JSON", op.Kind))
	}
	row.Result = result
	return row, nil
}

// safeApply turns a projector's panic into an error: a bug in one kind of
// operation must not stop the node from applying all the others.
func safeApply(p Projector, b *pebble.Batch, pos uint64, op Op) (result json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return p.Apply(b, noCloseReader{b}, pos, op)
}

// checkKeys refuses a batch that touches the reserved key space.
func checkKeys(b *pebble.Batch) error {
	r := b.Reader()
	for {
		kind, k, _, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		// A range operation's key is its start, so comparing it alone also
		// catches a range that begins inside the reserved space. LogData
		// carries no key at all.
		if kind != pebble.InternalKeyKindLogData && bytes.Compare(k, []byte{1}) < 0 {
			return fmt.Errorf("wrote key %q inside the reserved key space", k)
		}
	}
}

// advance publishes a new applied position and wakes whoever waits for it.
func (n *Node) advance(pos uint64) {
	n.mu.Lock()
	n.pos.Store(pos)
	for n.waiters.Len() > 0 && n.waiters[0].pos <= pos {
		w := heap.Pop(&n.waiters).(*waiter)
		close(w.ch)
	}
	n.mu.Unlock()
}

// waiter is a caller of WaitFor. They are kept in a heap by position, so
// applying an entry wakes exactly the callers it satisfies.
type waiter struct {
	pos   uint64
	ch    chan struct{}
	index int
}

type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].pos < h[j].pos }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
func (h *waitHeap) push(w *waiter) { heap.Push(h, w) }
func (h *waitHeap) remove(w *waiter) {
	if w.index >= 0 && w.index < len(*h) && (*h)[w.index] == w {
		heap.Remove(h, w.index)
	}
}
