package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A single node's appends go in groups: the operations that arrive while
// a group is being appended wait, and go together as the next group. A
// group's messages are published without waiting between them, and once the
// server has stored them all they are made durable together, in one write
// and one fsync of the journal (journal.go). Each operation keeps its own
// message: its own position, its own op_id in the duplicate window.
//
// There is no goroutine of its own: the first caller to find no group in
// flight leads, appends what is waiting, and hands the lead to the first
// caller that queued meanwhile.
type appendGroup struct {
	mu      sync.Mutex
	busy    bool
	waiting []*groupedAppend
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
	lead bool // not a result: the caller leads the next group
}

const (
	// maxGroup and maxGroupBytes bound one group; what is left waits for
	// the next one.
	maxGroup      = 256
	maxGroupBytes = 4 << 20
	// journalReadWait bounds reading back, from the stream, an entry the
	// journal must hold but was not handed.
	journalReadWait = 10 * time.Second
)

// appendGrouped appends m in the next group, leading it if no group is in
// flight.
func (l *JetStreamLog) appendGrouped(ctx context.Context, m Message) (uint64, error) {
	g := l.group
	me := &groupedAppend{ctx: ctx, msg: m, done: make(chan groupedResult, 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, me)
	if g.busy {
		g.mu.Unlock()
		// A queued caller waits for its result whatever its context says:
		// it may be handed the lead, and the group it is in is bounded.
		if r := <-me.done; !r.lead {
			return r.pos, r.err
		}
		g.mu.Lock()
	}
	g.busy = true
	group, rest := takeGroup(g.waiting)
	g.waiting = rest
	g.mu.Unlock()

	l.appendGroup(group)

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

// takeGroup splits the waiting callers into the next group and the rest.
func takeGroup(waiting []*groupedAppend) (group, rest []*groupedAppend) {
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

// appendGroup publishes the group's messages, waits for the server to
// store each, makes the stored ones durable in the journal and delivers
// each caller its result. A caller that has gone already is told nothing
// was appended, and nothing of its is.
func (l *JetStreamLog) appendGroup(group []*groupedAppend) {
	type sent struct {
		a *groupedAppend
		f jetstream.PubAckFuture
	}
	out := make([]sent, 0, len(group))
	for _, a := range group {
		if err := a.ctx.Err(); err != nil {
			a.done <- groupedResult{err: fmt.Errorf("%w: %w", ErrNotAppended, err)}
			continue
		}
		f, err := l.send(a.msg, stallWait(a.ctx))
		if err != nil {
			a.done <- groupedResult{err: fmt.Errorf("%w: %w", ErrNotAppended, err)}
			continue
		}
		out = append(out, sent{a, f})
	}
	results := make([]groupedResult, len(out))
	recs := make([]journalRecord, 0, len(out))
	var through uint64 // every position answered must be durable
	unsure := false
	for i, s := range out {
		// Every acknowledgement is awaited, whatever the caller's context
		// says: a message stored and not journaled would hold up every
		// follower until the journal holds it.
		pos, dup, err := l.await(context.Background(), s.f, s.a.msg, true)
		results[i] = groupedResult{pos: pos, err: err}
		switch {
		case err == nil:
			// A repeated id's position is its first message's, which an
			// earlier group that failed its journal write may have left out.
			through = max(through, pos)
			if !dup {
				recs = append(recs, journalRecord{pos: pos, hdr: appendHeader(nil, natsMsg(s.a.msg).Header), data: s.a.msg.Data})
			}
		case !errors.Is(err, ErrNotAppended) && !errors.Is(err, ErrLogClosed):
			unsure = true // it may be stored at a position nobody was told
		}
	}
	if err := l.journalThrough(recs, through, unsure); err != nil {
		for i := range results {
			if results[i].err == nil {
				// Stored by the server, not yet durable: whether it
				// survives a crash is not known.
				results[i] = groupedResult{err: err}
			}
		}
	}
	for i, s := range out {
		s.a.done <- results[i]
	}
}

// journalThrough writes recs to the journal, reading back from the stream
// every position up to through that it was not handed (an earlier write
// that failed, an acknowledgement that never came); with toEnd, every
// position up to the stream's end. So the journal always holds every
// position up to its last, and every position answered is durable.
func (l *JetStreamLog) journalThrough(recs []journalRecord, through uint64, toEnd bool) error {
	next := l.journal.position() + 1
	var all []journalRecord
	// Reading back is rare: the context is made only when it is needed.
	var ctx context.Context
	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	readBack := func(to uint64) error {
		if ctx == nil && next <= to {
			ctx, cancel = context.WithTimeout(context.Background(), journalReadWait)
		}
		for ; next <= to; next++ {
			m, err := l.stream.GetMsg(ctx, next)
			if err != nil {
				return fmt.Errorf("state: read position %d back for the journal: %w", next, err)
			}
			all = append(all, journalRecord{pos: next, hdr: appendHeader(nil, m.Header), data: m.Data})
		}
		return nil
	}
	for _, r := range recs {
		if r.pos < next {
			continue
		}
		if err := readBack(r.pos - 1); err != nil {
			return err
		}
		all = append(all, r)
		next = r.pos + 1
	}
	if err := readBack(through); err != nil {
		return err
	}
	if toEnd {
		lctx, lcancel := context.WithTimeout(context.Background(), journalReadWait)
		last, err := l.Last(lctx)
		lcancel()
		if err != nil {
			return err
		}
		if err := readBack(last); err != nil {
			return err
		}
	}
	return l.journal.write(all)
}
