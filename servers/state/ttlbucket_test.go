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
