package state

import (
	"context"
	"errors"
)

// Message is one entry to append. ID is the operation's id; a log that
// remembers recent ids (JetStream's duplicate window) answers a repeated ID
// with the position of the entry that already holds it instead of appending
// it again.
type Message struct {
	ID   string
	Data []byte
	// Claim, if set, makes this entry a claim of that seat rather than an
	// operation: it is kept under the seat's claim key, where a fence
	// looks (see Fence). Only a fleet's lease store appends claims.
	Claim string
	// Fence, if set, stores the message only while the newest claim of
	// Fence.Seat is the one at Fence.Claim: a node that has lost a seat to
	// another cannot append as it, whatever its acknowledgements said.
	Fence *Fence
}

// Fence is the condition a seat's append carries: the position of the
// seat's claim the writer holds. A log that cannot check it must refuse the
// message (ErrNotAppended) rather than store it unchecked.
type Fence struct {
	Seat  string
	Claim uint64 // 0: the seat has never been claimed
}

// Entry is one appended message at its position. Positions start at 1 and
// grow by one per entry; a gap means the log no longer holds what was there.
type Entry struct {
	Position uint64
	Data     []byte
}

// Log is the durable, ordered operation log. It is the seam between a node
// and where its operations are kept: the embedded JetStream log by default,
// a clustered one in a fleet, a faulty one in tests.
type Log interface {
	// Append stores msgs in order and answers each one's position, once the
	// log has made it durable. An error wrapping ErrNotAppended means none of
	// msgs was stored; any other error means some or all of them may have
	// been.
	Append(ctx context.Context, msgs []Message) ([]uint64, error)
	// Last is the position of the newest entry (0 when the log is empty).
	Last(ctx context.Context) (uint64, error)
	// Follow calls deliver with every entry from position from onwards, in
	// order, waiting for new ones as they are appended. It returns when ctx
	// ends, when deliver returns an error (that error), or when the log
	// fails. An entry may be delivered again after Follow is called again;
	// it is the caller's job to skip what it has already seen.
	Follow(ctx context.Context, from uint64, deliver func(Entry) error) error
	// Close releases the log. Appends after Close fail with ErrNotAppended.
	Close() error
}

// ErrNotAppended marks an append the log knows it did not store.
var ErrNotAppended = errors.New("state: nothing was appended")

// ErrFenced marks an append refused because the seat it was made for has
// been claimed since by another holder. It always comes wrapped with
// ErrNotAppended: nothing was stored.
var ErrFenced = errors.New("state: the seat's claim has moved")

// ErrLogClosed is returned by a log that has been closed.
var ErrLogClosed = errors.New("state: log closed")
