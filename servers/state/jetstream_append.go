package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Appending to the JetStream log: sending messages, waiting for their
// acknowledgements, and what the server's answers mean — stored, refused
// for good (a fence that no longer holds), or refused for now and sent
// again. A single node's grouped appends are in jetstream_group.go.

// Append publishes msgs without waiting between them, then waits for every
// acknowledgement. On a single node's log each message goes in the next
// group of appends, made durable together (see appendGroup).
func (l *JetStreamLog) Append(ctx context.Context, msgs []Message) ([]uint64, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %w", ErrNotAppended, ErrLogClosed)
	}
	if err := ctx.Err(); err != nil {
		// Whoever asked has gone already; do not start a write nobody will
		// hear the outcome of.
		return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	if l.group == nil {
		return l.publish(ctx, msgs)
	}
	positions := make([]uint64, 0, len(msgs))
	for i, m := range msgs {
		pos, err := l.appendGrouped(ctx, m)
		if err != nil {
			if i > 0 {
				// Earlier ones were stored: not "nothing appended".
				return nil, fmt.Errorf("state: %d of %d messages were appended, then: %v", i, len(msgs), err)
			}
			return nil, err
		}
		positions = append(positions, pos)
	}
	return positions, nil
}

// publish sends msgs one by one, each stored and fsynced on its own.
func (l *JetStreamLog) publish(ctx context.Context, msgs []Message) ([]uint64, error) {
	stall := stallWait(ctx)
	var seats []string
	for _, m := range msgs {
		if m.Fence != nil {
			seats = append(seats, m.Fence.Seat)
		}
	}
	unlock := l.fences.lock(seats)
	defer unlock()
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := l.send(m, stall)
		if err != nil {
			// The client refused before sending (window full past the stall
			// wait, connection closed): this message did not leave. Earlier
			// ones did, so only a first failure is known not to be stored.
			if len(futures) == 0 {
				return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			return nil, err
		}
		futures = append(futures, f)
	}
	positions := make([]uint64, len(futures))
	for i, f := range futures {
		// The server's no to the first message means nothing was stored;
		// to a later one, that the earlier ones may have been.
		pos, _, err := l.await(ctx, f, msgs[i], i == 0)
		if err != nil {
			return nil, err
		}
		positions[i] = pos
	}
	return positions, nil
}

// stallWait is how long a send may wait for room in the window of
// unacknowledged appends: as long as whoever asked still waits.
func stallWait(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 5 * time.Second
}

// send publishes m without waiting for its acknowledgement.
func (l *JetStreamLog) send(m Message, stall time.Duration) (jetstream.PubAckFuture, error) {
	return l.js.PublishMsgAsync(natsMsg(m), jetstream.WithStallWait(stall))
}

// natsMsg is the message m is stored as: its subject and its headers,
// which are set here rather than through the client's options so that the
// journal can record exactly what the server stores.
func natsMsg(m Message) *nats.Msg {
	subject := streamSubject
	if m.Claim != "" {
		subject = claimSubject(m.Claim)
	}
	msg := &nats.Msg{Subject: subject, Data: m.Data, Header: nats.Header{}}
	if m.ID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	}
	if m.Fence != nil {
		// The server stores the message only if the newest entry under
		// the seat's claim key is still the claim the writer holds.
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(m.Fence.Claim, 10))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, claimSubject(m.Fence.Seat))
	}
	return msg
}

// await waits for m's acknowledgement: its position, and whether that
// position is an earlier message's with the same id (dup). refusalKnown
// says the server's no means m was not stored (ErrNotAppended); otherwise
// it is an unknown outcome.
func (l *JetStreamLog) await(ctx context.Context, f jetstream.PubAckFuture, m Message, refusalKnown bool) (pos uint64, dup bool, err error) {
	for retries := 0; ; retries++ {
		ack, again, err := l.awaitOnce(ctx, f, m, refusalKnown)
		if !again || retries == inProcessRetries {
			if ack == nil {
				return 0, false, err
			}
			return ack.Sequence, ack.Duplicate, err
		}
		// The server could not take it yet (see sendAgain); sent again
		// once what it waited on is stored, it is answered as if it had
		// come alone.
		select {
		case <-time.After(inProcessWait):
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-l.done:
			return 0, false, ErrLogClosed
		}
		if f, err = l.send(m, stallWait(ctx)); err != nil {
			// Not sent again, but the other store may still land.
			return 0, false, err
		}
	}
}

// inProcessWait and inProcessRetries pace the sends of a message the
// server could not take yet: a store takes a replication round trip, so a
// few tens of milliseconds settle it.
const (
	inProcessWait    = 20 * time.Millisecond
	inProcessRetries = 100
)

// errCodeInProcess is the server's answer to a message whose id another
// message, not yet stored, carries ("duplicate message id is in process").
const errCodeInProcess = 10158

// sendAgain reports the server's answers that refuse a message for now,
// not for good; nothing was stored, and the same message sent again once
// the server is done with another one is answered on its merits:
//   - 10158: the same operation (its op_id) is being stored through
//     another node; sent again it is answered with that store's position,
//     or, if that store failed, stored.
//   - 10164 ("wrong last sequence", without a sequence): a message
//     conditional on a key's newest entry (a fence, a lease's revision)
//     came while another message under that key was still being stored,
//     so the condition could not be checked yet. A replicated stream keeps
//     the key busy until the leader has applied that message, which it
//     does a moment after acknowledging it: the same writer's next message
//     can meet it. It says nothing about whether the condition holds.
func sendAgain(e *jetstream.APIError) bool {
	return e.ErrorCode == errCodeInProcess || e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// awaitOnce is one wait of await; again says the message should be sent
// again (see sendAgain).
func (l *JetStreamLog) awaitOnce(ctx context.Context, f jetstream.PubAckFuture, m Message, refusalKnown bool) (ack *jetstream.PubAck, again bool, err error) {
	select {
	case ack := <-f.Ok():
		return ack, false, nil
	case err := <-f.Err():
		var apiErr *jetstream.APIError
		switch {
		case !errors.As(err, &apiErr):
			return nil, false, err
		case sendAgain(apiErr):
			if refusalKnown && apiErr.ErrorCode != errCodeInProcess {
				// If it is still refused when the sends run out, it was
				// not stored; an op_id in process may have been, elsewhere.
				err = fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			return nil, true, err
		case !refusalKnown:
			return nil, false, err
		case fenceRefused(apiErr) && m.Fence != nil:
			// The server answered, and its answer was no: not stored.
			return nil, false, fmt.Errorf("%w: %w: %w", ErrNotAppended, ErrFenced, err)
		default:
			return nil, false, fmt.Errorf("%w: %w", ErrNotAppended, err)
		}
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-l.done:
		// Sent, and maybe stored, but nobody is left to say.
		return nil, false, ErrLogClosed
	}
}

// fenceRefused reports the server's answer to a condition that no longer
// holds: the newest entry under the key is not the one expected (10071).
// The same words without a sequence (10164) are not this: see sendAgain.
func fenceRefused(e *jetstream.APIError) bool {
	return e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// keyedMutex is a lock per key, for a few keys at a time.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int
}

// lock takes every key's lock, in order so two callers cannot deadlock,
// and returns what releases them.
func (k *keyedMutex) lock(keys []string) func() {
	if len(keys) == 0 {
		return func() {}
	}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	held := make([]*keyLock, 0, len(keys))
	for _, key := range keys {
		k.mu.Lock()
		if k.locks == nil {
			k.locks = map[string]*keyLock{}
		}
		l := k.locks[key]
		if l == nil {
			l = &keyLock{}
			k.locks[key] = l
		}
		l.users++
		k.mu.Unlock()
		l.Lock()
		held = append(held, l)
	}
	return func() {
		for i, l := range held {
			l.Unlock()
			k.mu.Lock()
			if l.users--; l.users == 0 {
				delete(k.locks, keys[i])
			}
			k.mu.Unlock()
		}
	}
}
