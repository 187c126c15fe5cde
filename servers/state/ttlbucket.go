package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A TTLBucket is coordination state that forgets itself: a JetStream
// key-value bucket beside the log, on the same NATS, whose keys each
// expire on their own — presence in an artifact's room, a fleet's seat
// leases. It is not part of the log: nothing in it is replayed, and a node
// that restarts starts with whatever has not yet expired. It lives in
// memory, one value per key, replicated as the log is (once on a single
// node, three times in a fleet), since what it holds is worth nothing
// after its TTL anyway.
//
// A key's TTL is set by every write to it, never by kv.Update, which would
// write the value without one: a renewal is the next publish to the key's
// subject carrying its TTL — unconditional (Put) for keys only their
// writer writes, or conditional on the revision it expects to replace
// (Renew, expected-last-sequence-per-subject) for keys several writers
// contend for. When a key expires the bucket leaves a marker, so a watcher
// sees it go.
//
// A TTLBucket is safe for concurrent use and owns no goroutine; it stops
// working when the log that made it closes.
type TTLBucket struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	prefix string // the subject prefix of its keys: $KV.<bucket>.
	stream string // the stream behind it: KV_<bucket>
}

// TTLEntry is one key's value at a revision; Gone when it expired or was
// deleted.
type TTLEntry struct {
	Key      string
	Value    []byte
	Revision uint64
	Gone     bool
}

// ErrNoCoordination marks a node whose log is not the embedded JetStream
// one, so it has no coordination store to make a bucket in.
var ErrNoCoordination = errors.New("state: this node has no coordination store")

// ErrKeyTaken marks a Create of a key another writer holds.
var ErrKeyTaken = errors.New("state: the key is held")

// ErrKeyMoved marks a conditional write or delete whose expected revision
// is no longer the key's newest: someone else wrote it, or it expired.
var ErrKeyMoved = errors.New("state: the key has moved past the expected revision")

// ErrNoKey marks a key that is not held (never was, expired or deleted).
var ErrNoKey = errors.New("state: no such key")

// markerTTL is how long a bucket remembers that a key went: long enough
// for every watcher to see it, short enough not to pile up.
const markerTTL = time.Minute

// ttlOf rounds a TTL up to JetStream's unit, a whole second.
func ttlOf(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// TTLBucket opens (or creates) the named bucket beside the log, replicated
// as the log is. A fleet still forming is waited for, within ctx.
func (l *JetStreamLog) TTLBucket(ctx context.Context, name string) (*TTLBucket, error) {
	return l.ttlBucket(ctx, name, jetstream.MemoryStorage)
}

func (l *JetStreamLog) ttlBucket(ctx context.Context, name string, storage jetstream.StorageType) (*TTLBucket, error) {
	kv, err := l.keyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Storage: storage, LimitMarkerTTL: markerTTL})
	if err != nil {
		return nil, err
	}
	return &TTLBucket{js: l.js, kv: kv, prefix: "$KV." + name + ".", stream: "KV_" + name}, nil
}

// TTLBucket opens a coordination bucket beside the node's log: the
// JetStream one (embedded, or a fleet's), also when a test wraps it (a log
// with Unwrap).
func (n *Node) TTLBucket(ctx context.Context, name string) (*TTLBucket, error) {
	return n.ttlBucket(ctx, name, jetstream.MemoryStorage)
}

// DurableTTLBucket is a TTLBucket whose keys are kept on disk, in the data
// directory beside the log: what must outlive a node's restart until its
// TTL runs out (a person's sign-in).
func (n *Node) DurableTTLBucket(ctx context.Context, name string) (*TTLBucket, error) {
	return n.ttlBucket(ctx, name, jetstream.FileStorage)
}

func (n *Node) ttlBucket(ctx context.Context, name string, storage jetstream.StorageType) (*TTLBucket, error) {
	l := n.log
	for {
		if js, ok := l.(*JetStreamLog); ok {
			return js.ttlBucket(ctx, name, storage)
		}
		u, ok := l.(interface{ Unwrap() Log })
		if !ok {
			return nil, ErrNoCoordination
		}
		l = u.Unwrap()
	}
}

// Put sets key to value until ttl passes without another Put, whoever
// wrote it before: for keys only their writer writes (presence). ttl is
// rounded up to whole seconds.
func (b *TTLBucket) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value}, jetstream.WithMsgTTL(ttlOf(ttl)))
	return err
}

// Create sets key to value if nobody holds it, for ttl, and answers the
// revision written. A key somebody holds answers ErrKeyTaken.
//
// It is not the key-value client's Create, which, when the key has been
// written before, reads it from the nearest replica to learn whether it
// was deleted: a replica that has not yet stored the delete answers the
// old value, and a seat released through one node was refused to a claim
// through another.
func (b *TTLBucket) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	var over uint64 // the key's newest message, a delete or expiry marker; 0 when it has none
	for attempt := 1; ; attempt++ {
		rev, err := b.write(ctx, key, value, ttl, over)
		if !errors.Is(err, ErrKeyMoved) {
			return rev, err
		}
		e, err := b.newest(ctx, key)
		switch {
		case errors.Is(err, ErrNoKey):
			over = 0
		case err != nil:
			return 0, err
		case !e.Gone:
			return 0, fmt.Errorf("%w: %s", ErrKeyTaken, key)
		default:
			over = e.Revision
		}
		if attempt == createAttempts {
			// Other writers keep moving the key between the read and the
			// write: somebody is taking it.
			return 0, fmt.Errorf("%w: %s", ErrKeyTaken, key)
		}
	}
}

// createAttempts bounds how often Create writes a key that moves under it.
const createAttempts = 3

// Renew writes value over revision rev with a fresh ttl and answers the new
// revision; ErrKeyMoved if rev is no longer the key's newest.
func (b *TTLBucket) Renew(ctx context.Context, key string, value []byte, ttl time.Duration, rev uint64) (uint64, error) {
	return b.write(ctx, key, value, ttl, rev)
}

// write publishes value to key with a ttl if the key's newest message is
// still at revision over (0: the key has none), and answers the revision
// written; ErrKeyMoved if it is not.
func (b *TTLBucket) write(ctx context.Context, key string, value []byte, ttl time.Duration, over uint64) (uint64, error) {
	var rev uint64
	err := b.conditional(ctx, func() error {
		ack, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: b.prefix + key, Data: value},
			jetstream.WithMsgTTL(ttlOf(ttl)), jetstream.WithExpectLastSequencePerSubject(over))
		if err == nil {
			rev = ack.Sequence
		}
		return err
	})
	return rev, err
}

// Delete removes key if its newest revision is still rev.
func (b *TTLBucket) Delete(ctx context.Context, key string, rev uint64) error {
	return b.conditional(ctx, func() error { return b.kv.Delete(ctx, key, jetstream.LastRevision(rev)) })
}

// conditional runs a write conditional on a key's revision, sending it
// again while the server cannot check the condition yet (sendAgain), and
// answers ErrKeyMoved when the condition does not hold.
func (b *TTLBucket) conditional(ctx context.Context, write func() error) error {
	for sends := 1; ; sends++ {
		err := write()
		var apiErr *jetstream.APIError
		switch {
		case !errors.As(err, &apiErr):
			return err
		case fenceRefused(apiErr):
			return fmt.Errorf("%w: %w", ErrKeyMoved, err)
		case !sendAgain(apiErr) || sends == inProcessRetries:
			return err
		}
		select {
		case <-time.After(inProcessWait):
		case <-ctx.Done():
			return err
		}
	}
}

// Get reads key's newest value; ErrNoKey if it is not held.
func (b *TTLBucket) Get(ctx context.Context, key string) (TTLEntry, error) {
	e, err := b.newest(ctx, key)
	if err == nil && e.Gone {
		return TTLEntry{}, fmt.Errorf("%w: %s", ErrNoKey, key)
	}
	return e, err
}

// newest reads key's newest message from the bucket's leader: its value,
// or, Gone, the marker a delete, a purge or the key's TTL left; ErrNoKey if
// it has none. The key-value client would ask any replica, and a replica
// that has fallen behind — a node just back from a partition — answers the
// value it last had: a lease's holder that read its renewed lease there
// would see an old holder and give the seat up. A node that cannot reach
// the leader has no answer, which its callers already take as "try again".
func (b *TTLBucket) newest(ctx context.Context, key string) (TTLEntry, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{b.prefix + key})
	msg, err := b.js.Conn().RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET."+b.stream, req)
	if err != nil {
		return TTLEntry{}, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return TTLEntry{}, fmt.Errorf("state: the %s bucket's answer for %s: %w", b.stream, key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return TTLEntry{}, fmt.Errorf("%w: %s", ErrNoKey, key)
	case resp.Error != nil:
		return TTLEntry{}, resp.Error
	case resp.Message == nil:
		return TTLEntry{}, fmt.Errorf("state: the %s bucket answered no message for %s", b.stream, key)
	}
	e := TTLEntry{Key: key, Value: resp.Message.Data, Revision: resp.Message.Seq}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return TTLEntry{}, fmt.Errorf("state: the %s bucket's headers for %s: %w", b.stream, key, err)
		}
		// A delete or purge, or the marker a key leaves when its TTL runs out.
		if h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
			e.Value, e.Gone = nil, true
		}
	}
	return e, nil
}

// Entries lists the keys matching filter (a subject filter over keys:
// "room.art_1.>", "room.*.ada", "seat.>") that have not expired, with
// their values.
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
			out = append(out, TTLEntry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TTLWatch follows the keys matching a filter: every value they are set
// to, and when they go (expired or removed).
type TTLWatch struct{ w jetstream.KeyWatcher }

// ErrWatchEnded is what Next says once its watch can deliver nothing more.
var ErrWatchEnded = errors.New("state: the watch ended")

// Watch starts following filter: the current values first, then each
// change.
func (b *TTLBucket) Watch(ctx context.Context, filter string) (*TTLWatch, error) {
	w, err := b.kv.WatchFiltered(ctx, []string{filter})
	if err != nil {
		return nil, err
	}
	return &TTLWatch{w: w}, nil
}

// Next waits for the next value or going.
func (t *TTLWatch) Next(ctx context.Context) (TTLEntry, error) {
	for {
		e, err := t.NextMarked(ctx)
		if err != nil || e.Key != "" {
			return e, err
		}
	}
}

// NextMarked is Next that also answers, once, an entry with an empty Key
// where the current values end and the changes begin: what a follower
// that rebuilds its picture of the bucket waits for before trusting it.
func (t *TTLWatch) NextMarked(ctx context.Context) (TTLEntry, error) {
	select {
	case e, ok := <-t.w.Updates():
		if !ok {
			return TTLEntry{}, ErrWatchEnded
		}
		if e == nil {
			return TTLEntry{}, nil
		}
		op := e.Operation()
		return TTLEntry{Key: e.Key(), Value: e.Value(), Revision: e.Revision(),
			Gone: op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge}, nil
	case <-ctx.Done():
		return TTLEntry{}, ctx.Err()
	}
}

// Stop ends the watch; safe to call twice.
func (t *TTLWatch) Stop() { _ = t.w.Stop() }
