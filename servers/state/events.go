package state

import "github.com/nats-io/nats.go"

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
