package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlet/hub/servers/seal"
)

// SealedValues is a durable key-value bucket beside the log whose values
// are sealed with AES-256-GCM under a key its opener gives (one of the
// fleet's keys): what any node of a fleet must read and that must outlive
// every node — a seat's upstream OAuth grant, which the seat's next
// holder needs — while a reader of the bucket, or of a copy of its files,
// learns nothing of it. It is on disk and replicated as the log is; its
// values do not expire.
//
// Its methods take no context, as the vault a hub's grant minter reads
// (grants.Vault) takes none: each is bounded by valuesWait. It is safe for
// concurrent use and owns no goroutine.
type SealedValues struct {
	kv     jetstream.KeyValue
	box    *seal.Box
	bucket string
}

// valuesWait bounds each read or write: a replicated write answers in
// milliseconds, or its bucket is electing a leader (up to 9 s).
const valuesWait = 15 * time.Second

// OpenSealedValues opens (or creates) the named bucket, sealing under key
// (32 bytes). A fleet still forming is waited for, within ctx.
func (l *JetStreamLog) OpenSealedValues(ctx context.Context, bucket string, key []byte) (*SealedValues, error) {
	box, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	kv, err := l.durableBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return &SealedValues{kv: kv, box: box, bucket: bucket}, nil
}

// Set seals value under name, over whatever it held.
func (s *SealedValues) Set(name, value string) error {
	sealed, err := s.box.Seal([]byte(value), []byte(name))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), valuesWait)
	defer cancel()
	if _, err := s.kv.Put(ctx, name, sealed); err != nil {
		return fmt.Errorf("state: sealing %s in %s: %w", name, s.bucket, err)
	}
	return nil
}

// Lookup answers the value sealed under name; false when there is none,
// when the bucket cannot be read now, or when the value does not open
// under this key (sealed by a node given another).
func (s *SealedValues) Lookup(name string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), valuesWait)
	defer cancel()
	e, err := s.kv.Get(ctx, name)
	if err != nil {
		return "", false
	}
	plain, err := s.box.Open(e.Value(), []byte(name))
	if err != nil {
		return "", false
	}
	return string(plain), true
}

// Delete forgets name, reporting whether it held a value.
func (s *SealedValues) Delete(name string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), valuesWait)
	defer cancel()
	if _, err := s.kv.Get(ctx, name); errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err := s.kv.Delete(ctx, name); err != nil {
		return false, fmt.Errorf("state: forgetting %s in %s: %w", name, s.bucket, err)
	}
	return true, nil
}
