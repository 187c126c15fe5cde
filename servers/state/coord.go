package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The coordination store sits beside the log on the same NATS: key-value
// buckets whose keys each expire on their own (seat leases; presence), and
// core pub/sub for events nobody needs kept (heartbeats). Nothing in it is
// part of the log: it is never replayed, and what a bucket holds is worth
// nothing once its TTL has passed.
//
// A key's TTL is set by every write to it, never by kv.Update, which would
// write the value without one: a renewal is a publish to the key's subject
// carrying its TTL and, to be conditional, the revision it expects to
// replace (expected-last-sequence-per-subject).

// CoordBucket is one coordination bucket: a JetStream key-value bucket in
// memory, one value per key, replicated like the log, whose keys expire
// each after its own TTL, leaving a marker a watcher sees. It is safe for
// concurrent use and owns no goroutine; it stops working when its log
// closes.
type CoordBucket struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	prefix string // the subject prefix of its keys: $KV.<bucket>.
}

// CoordEntry is one key's value at a revision; Gone when it expired or was
// deleted.
type CoordEntry struct {
	Key      string
	Value    []byte
	Revision uint64
	Gone     bool
}

// ErrKeyTaken marks a Create of a key another writer holds.
var ErrKeyTaken = errors.New("state: the key is held")

// ErrKeyMoved marks a conditional write or delete whose expected revision
// is no longer the key's newest: someone else wrote it, or it expired.
var ErrKeyMoved = errors.New("state: the key has moved past the expected revision")

// ErrNoKey marks a key that is not held (never was, expired or deleted).
var ErrNoKey = errors.New("state: no such key")

// CoordBucket opens (or creates) the named bucket, replicated as the log
// is. Keys expire one by one (their TTL is whole seconds, at least one);
// the marker an expiry leaves is kept for markerTTL.
func (l *JetStreamLog) CoordBucket(ctx context.Context, name string) (*CoordBucket, error) {
	var kv jetstream.KeyValue
	err := untilReady(ctx, func(ctx context.Context) error {
		var err error
		kv, err = l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         name,
			History:        1,
			Storage:        jetstream.MemoryStorage,
			Replicas:       l.replicas,
			LimitMarkerTTL: markerTTL,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state: the %s bucket: %w", name, err)
	}
	return &CoordBucket{js: l.js, kv: kv, prefix: "$KV." + name + "."}, nil
}

// markerTTL is how long a bucket remembers that a key went: long enough
// for every watcher to see it, short enough not to pile up.
const markerTTL = time.Minute

// ttlOf rounds a TTL up to JetStream's unit, a whole second.
func ttlOf(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// Create sets key to value if nobody holds it, for ttl, and answers the
// revision written. A key somebody holds answers ErrKeyTaken.
func (b *CoordBucket) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	rev, err := b.kv.Create(ctx, key, value, jetstream.KeyTTL(ttlOf(ttl)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: %w", ErrKeyTaken, err)
	}
	return rev, err
}

// Renew writes value over revision rev with a fresh ttl and answers the new
// revision; ErrKeyMoved if rev is no longer the key's newest.
func (b *CoordBucket) Renew(ctx context.Context, key string, value []byte, ttl time.Duration, rev uint64) (uint64, error) {
	ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value},
		jetstream.WithMsgTTL(ttlOf(ttl)), jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && fenceRefused(apiErr) {
			return 0, fmt.Errorf("%w: %w", ErrKeyMoved, err)
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// Put writes value for ttl whoever held the key: a plain renewal, for keys
// only their writer writes (presence).
func (b *CoordBucket) Put(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value}, jetstream.WithMsgTTL(ttlOf(ttl)))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Delete removes key if its newest revision is still rev.
func (b *CoordBucket) Delete(ctx context.Context, key string, rev uint64) error {
	err := b.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && fenceRefused(apiErr) {
		return fmt.Errorf("%w: %w", ErrKeyMoved, err)
	}
	return err
}

// Get reads key's newest value; ErrNoKey if it is not held.
func (b *CoordBucket) Get(ctx context.Context, key string) (CoordEntry, error) {
	e, err := b.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return CoordEntry{}, fmt.Errorf("%w: %s", ErrNoKey, key)
	}
	if err != nil {
		return CoordEntry{}, err
	}
	return CoordEntry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()}, nil
}

// Entries lists the held keys matching filter (a subject filter over keys,
// such as "seat.>"), with their values.
func (b *CoordBucket) Entries(ctx context.Context, filter string) ([]CoordEntry, error) {
	w, err := b.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []CoordEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return out, ctx.Err()
			}
			if e == nil { // every current value has been delivered
				return out, nil
			}
			out = append(out, CoordEntry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CoordWatch follows the keys matching a filter: every value they are set
// to, and when they go.
type CoordWatch struct {
	w jetstream.KeyWatcher
}

// Watch starts following filter: the current values first, then a nil-key
// entry (Key "") saying they have all been delivered, then each change.
func (b *CoordBucket) Watch(ctx context.Context, filter string) (*CoordWatch, error) {
	w, err := b.kv.WatchFiltered(ctx, []string{filter})
	if err != nil {
		return nil, err
	}
	return &CoordWatch{w: w}, nil
}

// ErrWatchEnded is what Next says once its watch can deliver nothing more.
var ErrWatchEnded = errors.New("state: the watch ended")

// Next waits for the next change. An entry with an empty Key is the marker
// that ends the current values.
func (t *CoordWatch) Next(ctx context.Context) (CoordEntry, error) {
	select {
	case e, ok := <-t.w.Updates():
		if !ok {
			return CoordEntry{}, ErrWatchEnded
		}
		if e == nil {
			return CoordEntry{}, nil
		}
		op := e.Operation()
		return CoordEntry{Key: e.Key(), Value: e.Value(), Revision: e.Revision(),
			Gone: op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge}, nil
	case <-ctx.Done():
		return CoordEntry{}, ctx.Err()
	}
}

// Stop ends the watch; safe to call twice.
func (t *CoordWatch) Stop() { _ = t.w.Stop() }

// Publish sends an event on core NATS: no consensus, no fsync, and nobody
// who is not listening now ever sees it.
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
