package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A TTLBucket is coordination state that forgets itself: a JetStream
// key-value bucket on the node's own NATS whose keys each expire on their
// own (presence in an artifact's room, and later seat leases). It is not
// part of the log: nothing in it is replayed, and a node that restarts
// starts with whatever has not yet expired.
//
// Every Put is a fresh publish to the key's subject carrying its own TTL
// (WithMsgTTL), never kv.Update, which would drop the TTL: a renewal is
// simply the next Put. The bucket keeps one value per key and lives in
// memory, since what it holds is worth nothing after its TTL anyway.
//
// A TTLBucket is safe for concurrent use and owns no goroutine; it stops
// working when the node that made it closes.
type TTLBucket struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	prefix string // the subject prefix of its keys: $KV.<bucket>.
}

// TTLEntry is one key a bucket holds.
type TTLEntry struct {
	Key   string
	Value []byte
}

// TTLBucket opens (or creates) the named bucket on the embedded log's
// server.
func (l *JetStreamLog) TTLBucket(ctx context.Context, name string) (*TTLBucket, error) {
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:  name,
		History: 1,
		Storage: jetstream.MemoryStorage,
		// Per-message TTLs, and a marker when a key expires so a watcher
		// sees it go; the marker itself is kept this long.
		LimitMarkerTTL: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("state: the %s bucket: %w", name, err)
	}
	return &TTLBucket{js: l.js, kv: kv, prefix: "$KV." + name + "."}, nil
}

// ErrNoCoordination marks a node whose log is not the embedded JetStream
// one, so it has no coordination store to make a bucket in.
var ErrNoCoordination = errors.New("state: this node has no coordination store")

// TTLBucket opens a coordination bucket on the node's own JetStream: the
// embedded log's server, also when a test wraps it (a log with Unwrap).
func (n *Node) TTLBucket(ctx context.Context, name string) (*TTLBucket, error) {
	l := n.log
	for {
		if js, ok := l.(*JetStreamLog); ok {
			return js.TTLBucket(ctx, name)
		}
		u, ok := l.(interface{ Unwrap() Log })
		if !ok {
			return nil, ErrNoCoordination
		}
		l = u.Unwrap()
	}
}

// Put sets key to value until ttl passes without another Put. ttl is at
// least a second (JetStream's unit).
func (b *TTLBucket) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ttl = max(ttl, time.Second)
	_, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value}, jetstream.WithMsgTTL(ttl))
	return err
}

// Entries lists the keys matching filter (a subject filter over keys:
// "room.art_1.>" or "room.*.ada") that have not expired, with their values.
func (b *TTLBucket) Entries(ctx context.Context, filter string) ([]TTLEntry, error) {
	w, err := b.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []TTLEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return out, ctx.Err()
			}
			if e == nil { // every current value has been delivered
				return out, nil
			}
			out = append(out, TTLEntry{Key: e.Key(), Value: e.Value()})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TTLWatch follows the keys matching a filter: what they are set to, and
// when they go (expired or removed).
type TTLWatch struct{ w jetstream.KeyWatcher }

// TTLEvent is one change a watch sees; Gone means the key expired.
type TTLEvent struct {
	Key   string
	Value []byte
	Gone  bool
}

// Watch starts following filter from now on (current values first).
func (b *TTLBucket) Watch(ctx context.Context, filter string) (*TTLWatch, error) {
	w, err := b.kv.WatchFiltered(ctx, []string{filter})
	if err != nil {
		return nil, err
	}
	return &TTLWatch{w: w}, nil
}

// Next waits for the next change, skipping the marker that ends the
// current values.
func (t *TTLWatch) Next(ctx context.Context) (TTLEvent, error) {
	for {
		select {
		case e, ok := <-t.w.Updates():
			if !ok {
				return TTLEvent{}, errors.New("state: the watch ended")
			}
			if e == nil {
				continue
			}
			op := e.Operation()
			return TTLEvent{Key: e.Key(), Value: e.Value(), Gone: op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge}, nil
		case <-ctx.Done():
			return TTLEvent{}, ctx.Err()
		}
	}
}

// Stop ends the watch; safe to call twice.
func (t *TTLWatch) Stop() { _ = t.w.Stop() }
