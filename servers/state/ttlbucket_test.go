package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ART-6's store: a key in a TTL bucket is there until its TTL passes with
// no renewal, and a watcher is told when it goes; a Put renews rather than
// updates, so the newest value is what is read.
func TestTTLBucketKeysExpire(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := n.TTLBucket(ctx, "TEST_ROOMS")
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Watch(ctx, "room.a1.>")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := b.Put(ctx, "room.a1.ada", []byte("viewing"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "room.a1.ada", []byte("editing"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "room.a2.ada", []byte("viewing"), time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := b.Entries(ctx, "room.a1.>")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key != "room.a1.ada" || string(got[0].Value) != "editing" {
		t.Fatalf("entries %+v", got)
	}
	// The watcher sees both puts, then the key going when its one-second
	// TTL runs out: the renewal replaced the hour-long one.
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("the key never expired: %v", err)
		}
		if ev.Gone {
			if ev.Key != "room.a1.ada" {
				t.Fatalf("gone: %+v", ev)
			}
			break
		}
	}
	if got, err := b.Entries(ctx, "room.a1.>"); err != nil || len(got) != 0 {
		t.Fatalf("after expiry: %+v %v", got, err)
	}
	if got, err := b.Entries(ctx, "room.a2.>"); err != nil || len(got) != 1 {
		t.Fatalf("the other room: %+v %v", got, err)
	}
}

// The same bucket serves keys several writers contend for (seat leases):
// Create takes a key nobody holds; a renewal or delete names the revision
// it replaces and is refused once the key moved past it (another writer's
// put, or a delete); a renewal carries its own TTL, so a key renewed short
// goes when that runs out, whatever it was created with. A follower that
// rebuilds its picture is told where the current values end.
func TestTTLBucketContendedKeys(t *testing.T) {
	n := openNode(t, t.TempDir())
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := n.TTLBucket(ctx, "TEST_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := b.Create(ctx, "seat.ada", []byte("n1"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "seat.ada", []byte("n2"), time.Hour); !errors.Is(err, ErrKeyTaken) {
		t.Fatalf("a second create: %v", err)
	}
	next, err := b.Renew(ctx, "seat.ada", []byte("n1"), time.Hour, rev)
	if err != nil || next <= rev {
		t.Fatalf("renewal over the newest revision: %d %v", next, err)
	}
	if _, err := b.Renew(ctx, "seat.ada", []byte("n1"), time.Hour, rev); !errors.Is(err, ErrKeyMoved) {
		t.Fatalf("renewal over a revision since replaced: %v", err)
	}
	if err := b.Delete(ctx, "seat.ada", rev); !errors.Is(err, ErrKeyMoved) {
		t.Fatalf("delete over a revision since replaced: %v", err)
	}
	if e, err := b.Get(ctx, "seat.ada"); err != nil || string(e.Value) != "n1" || e.Revision != next {
		t.Fatalf("get %+v %v", e, err)
	}
	if err := b.Delete(ctx, "seat.ada", next); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "seat.ada"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("get after delete: %v", err)
	}

	held, err := b.Create(ctx, "seat.bob", []byte("n1"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Watch(ctx, "seat.bob")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e, err := w.NextMarked(ctx); err != nil || e.Key != "seat.bob" || e.Gone {
		t.Fatalf("the current value %+v %v", e, err)
	}
	if e, err := w.NextMarked(ctx); err != nil || e.Key != "" {
		t.Fatalf("the end of the current values %+v %v", e, err)
	}
	if _, err := b.Renew(ctx, "seat.bob", []byte("n1"), time.Second, held); err != nil {
		t.Fatal(err)
	}
	if e, err := w.NextMarked(ctx); err != nil || e.Key != "seat.bob" || e.Gone {
		t.Fatalf("the renewal %+v %v", e, err)
	}
	if e, err := w.NextMarked(ctx); err != nil || e.Key != "seat.bob" || !e.Gone {
		t.Fatalf("the key renewed for a second never went: %+v %v", e, err)
	}
	// A key that went leaves a marker as its newest message, and one never
	// written leaves nothing: neither is held.
	if e, err := b.Get(ctx, "seat.bob"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("get after the key went: %+v %v", e, err)
	}
	if e, err := b.Get(ctx, "seat.nobody"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("get of a key never written: %+v %v", e, err)
	}
	if _, err := b.Create(ctx, "seat.bob", []byte("n2"), time.Hour); err != nil {
		t.Fatalf("a lapsed key is free to take: %v", err)
	}
}

func TestTTLBucketNeedsJetStream(t *testing.T) {
	n := openNode(t, t.TempDir(), func(o *Options) { o.Log = nopLog{} })
	defer n.Close()
	if _, err := n.TTLBucket(context.Background(), "X"); !errors.Is(err, ErrNoCoordination) {
		t.Fatalf("err %v", err)
	}
}

type nopLog struct{}

func (nopLog) Append(context.Context, []Message) ([]uint64, error) { return nil, ErrNotAppended }
func (nopLog) Last(context.Context) (uint64, error)                { return 0, nil }
func (nopLog) Follow(ctx context.Context, _ uint64, _ func(Entry) error) error {
	<-ctx.Done()
	return ctx.Err()
}
func (nopLog) Close() error { return nil }
