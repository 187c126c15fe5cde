package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Events nobody needs kept (a fleet's heartbeats) go over core NATS beside
// the log: no consensus, no fsync, and nobody who is not listening now
// ever sees them.

// Publish sends an event on subject.
func (l *JetStreamLog) Publish(subject string, data []byte) error {
	return l.nc.Publish(subject, data)
}

// Subscribe calls fn with every event on subject (wildcards allowed) from
// now on, one at a time on the client's own goroutine, until the returned
// stop is called.
func (l *JetStreamLog) Subscribe(subject string, fn func(data []byte)) (stop func(), err error) {
	sub, err := l.nc.Subscribe(subject, func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// ErrNoAnswer marks a request nobody answered: nobody listens on its
// subject, or nobody replied within its context.
var ErrNoAnswer = errors.New("state: nobody answered the request")

// Request sends a question on subject and answers the first reply, within
// ctx; ErrNoAnswer (wrapped) when nobody listens or nobody replies in
// time.
func (l *JetStreamLog) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	m, err := l.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}

// Answer calls fn with every question on subject, one at a time on the
// client's own goroutine, and replies with what it returns (nothing for
// nil), until the returned stop is called.
func (l *JetStreamLog) Answer(subject string, fn func(data []byte) []byte) (stop func(), err error) {
	sub, err := l.nc.Subscribe(subject, func(m *nats.Msg) {
		if out := fn(m.Data); out != nil && m.Reply != "" {
			_ = m.Respond(out)
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
