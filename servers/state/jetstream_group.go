package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// A single node's log fsyncs every message before it acknowledges it, one
// message after another: on its own that caps durable writes at one per
// fsync, however many callers write at once. appendGroup lets the
// operations that arrive while an append is in flight go together as one
// atomic batch (JetStream's Nats-Batch-* headers), which the server stores
// and fsyncs once. Each operation keeps its own message: its own position,
// its own op_id in the duplicate window.
//
// There is no goroutine of its own: the first caller to find no append in
// flight leads, appends what is waiting, and hands the lead to the first
// caller that queued meanwhile.
type appendGroup struct {
	mu      sync.Mutex
	busy    bool
	waiting []*groupedAppend
	seq     uint64 // numbers this log's batches
	// stored counts the batches stored whole.
	stored atomic.Uint64
	prefix string // makes batch ids unique across the log's lives
	// beforeCommit, when set (by tests only), runs as a batch's commit is
	// about to be sent: the one moment a fault there can be timed.
	beforeCommit func()
}

// groupedAppend is one caller's message, waiting to be appended.
type groupedAppend struct {
	ctx  context.Context
	msg  Message
	done chan groupedResult // buffered: whoever delivers never waits
}

type groupedResult struct {
	pos  uint64
	err  error
	lead bool // not a result: the caller leads the next batch
}

const (
	// maxGroup and maxGroupBytes bound one batch, well inside the server's
	// own limit of 1,000 messages; what is left waits for the next one.
	maxGroup      = 256
	maxGroupBytes = 4 << 20
	// minGroup is the fewest messages worth a batch: the server stages a
	// batch in a store of its own, a fixed cost of about 16 single
	// appends; fewer go one by one, without waiting between them.
	minGroup = 24
	// groupAckWait bounds the wait for a batch's acknowledgement, and is
	// the wait when a caller in it has no deadline of its own.
	groupAckWait = time.Minute
)

// groupable reports whether m may share a batch: an operation with no
// fence (a fenced one is checked on its own) and not a seat's claim.
func groupable(m Message) bool { return m.Fence == nil && m.Claim == "" }

func newAppendGroup() *appendGroup {
	return &appendGroup{prefix: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

// appendGrouped appends m alone if nothing else is in flight, or in the
// next batch once the append in flight is done.
func (l *JetStreamLog) appendGrouped(ctx context.Context, m Message) (uint64, error) {
	g := l.group
	me := &groupedAppend{ctx: ctx, msg: m, done: make(chan groupedResult, 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, me)
	if g.busy {
		g.mu.Unlock()
		// A queued caller waits for its result whatever its context says:
		// it may be handed the lead, and the batch it is in is bounded.
		if r := <-me.done; !r.lead {
			return r.pos, r.err
		}
		g.mu.Lock()
	}
	g.busy = true
	batch, rest := takeGroup(g.waiting)
	g.waiting = rest
	g.seq++
	id := g.prefix + "." + strconv.FormatUint(g.seq, 36)
	g.mu.Unlock()

	l.appendBatch(id, batch)

	g.mu.Lock()
	if len(g.waiting) > 0 {
		g.waiting[0].done <- groupedResult{lead: true}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	r := <-me.done
	return r.pos, r.err
}

// takeGroup splits the waiting callers into the next batch and the rest.
func takeGroup(waiting []*groupedAppend) (batch, rest []*groupedAppend) {
	n, size := 0, 0
	for n < len(waiting) && n < maxGroup {
		size += len(waiting[n].msg.Data)
		if n > 0 && size > maxGroupBytes {
			break
		}
		n++
	}
	return waiting[:n:n], waiting[n:]
}

// appendBatch appends the batch's messages and delivers each caller its
// result. A caller that has gone already is told nothing was appended.
func (l *JetStreamLog) appendBatch(id string, batch []*groupedAppend) {
	live := batch[:0:0]
	for _, a := range batch {
		if err := a.ctx.Err(); err != nil {
			a.done <- groupedResult{err: fmt.Errorf("%w: %w", ErrNotAppended, err)}
			continue
		}
		live = append(live, a)
	}
	if len(live) < minGroup {
		l.appendEach(live)
		return
	}
	positions, err := l.publishAtomic(id, live)
	if errors.Is(err, errBatchRefused) {
		// Nothing of the batch was stored (one duplicate op_id, say, fails
		// it whole): each message goes again on its own and gets its own
		// answer.
		l.appendEach(live)
		return
	}
	if err == nil {
		l.group.stored.Add(1)
	}
	for i, a := range live {
		if err != nil {
			a.done <- groupedResult{err: err}
			continue
		}
		a.done <- groupedResult{pos: positions[i]}
	}
}

// appendEach sends every message on its own, without waiting between them,
// and delivers each its own answer.
func (l *JetStreamLog) appendEach(batch []*groupedAppend) {
	futures := make([]func() (uint64, error), len(batch))
	for i, a := range batch {
		f, err := l.send(a.msg, stallWait(a.ctx))
		if err != nil {
			futures[i] = func() (uint64, error) { return 0, fmt.Errorf("%w: %w", ErrNotAppended, err) }
			continue
		}
		futures[i] = func() (uint64, error) { return l.await(a.ctx, f, a.msg, true) }
	}
	for i, a := range batch {
		pos, err := futures[i]()
		a.done <- groupedResult{pos: pos, err: err}
	}
}

// errBatchRefused marks a batch the server answered no to: atomic, so none
// of it was stored.
var errBatchRefused = errors.New("state: the batch was refused")

// publishAtomic sends batch as one atomic batch and answers each message's
// position. Every message but the last is published without a reply; the
// last commits the batch, and its acknowledgement (after the one fsync)
// carries the last position and how many the batch stored.
func (l *JetStreamLog) publishAtomic(id string, batch []*groupedAppend) ([]uint64, error) {
	// As long as the most patient caller waits: one caller's short deadline
	// must not turn everybody's write into an unknown outcome.
	var wait time.Duration
	for _, a := range batch {
		dl, ok := a.ctx.Deadline()
		if !ok {
			wait = groupAckWait
			break
		}
		wait = max(wait, time.Until(dl), time.Millisecond)
	}
	wait = min(wait, groupAckWait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n := len(batch)
	var reply *nats.Msg
	for i, a := range batch {
		msg := &nats.Msg{Subject: streamSubject, Data: a.msg.Data, Header: nats.Header{}}
		if a.msg.ID != "" {
			msg.Header.Set(nats.MsgIdHdr, a.msg.ID)
		}
		msg.Header.Set(hdrBatchID, id)
		msg.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < n-1 {
			if err := l.nc.PublishMsg(msg); err != nil {
				// Part of a batch that never commits is never stored: the
				// server drops it when the batch times out.
				return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			continue
		}
		msg.Header.Set(hdrBatchCommit, "1")
		if h := l.group.beforeCommit; h != nil {
			h()
		}
		var err error
		reply, err = l.requestOrClose(ctx, msg)
		if err != nil {
			if errors.Is(err, nats.ErrNoResponders) {
				return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			return nil, err
		}
	}
	var ack struct {
		Seq   uint64 `json:"seq"`
		Count uint64 `json:"count"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return nil, fmt.Errorf("state: the batch's acknowledgement is not JSON: %w", err)
	}
	if ack.Error != nil {
		return nil, fmt.Errorf("%w: %s (%d)", errBatchRefused, ack.Error.Description, ack.Error.ErrCode)
	}
	if ack.Count != uint64(n) || ack.Seq < uint64(n) {
		return nil, fmt.Errorf("state: a batch of %d acknowledged as %d ending at %d", n, ack.Count, ack.Seq)
	}
	positions := make([]uint64, n)
	for i := range positions {
		positions[i] = ack.Seq - uint64(n-1-i)
	}
	return positions, nil
}

// requestOrClose sends the batch's commit and waits for its answer, or for
// the log to close: sent, and maybe stored, but nobody is left to say.
func (l *JetStreamLog) requestOrClose(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	reply, err := l.nc.RequestMsgWithContext(ctx, msg)
	if err != nil && isDone(l.done) {
		return nil, ErrLogClosed
	}
	return reply, err
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The headers of an atomic batch (JetStream's ADR-50).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)
