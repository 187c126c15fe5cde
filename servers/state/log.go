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

// ErrLogClosed is returned by a log that has been closed.
var ErrLogClosed = errors.New("state: log closed")
