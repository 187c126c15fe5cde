package state

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlet/hub/servers/seal"
)

// FleetKeys are the secrets every node of a fleet signs and seals with —
// the 2025 operator session ids, the 2026-07-28 input rounds' requestState,
// the seats' upstream OAuth grants — so that what one node signed or
// sealed another opens. Each is drawn once, by
// whichever node asks for it first, and kept in a durable key-value bucket
// beside the log (on disk, replicated as the log is), sealed with
// AES-256-GCM under a key derived from the fleet's route secret: a copy of
// the bucket's files, or a reader of the fleet's NATS without the secret,
// learns nothing of them. A fleet without a route secret (nodes on one
// machine over loopback, or an operator's NATS, whose access is its own
// credentials) seals them under a key derived from nothing secret: there
// the bucket is as private as the NATS it is on, and no more.
//
// A key once drawn is never replaced: replacing it would refuse every
// session, round and page signed under the old one, on every node at
// once. FleetKeys are safe for concurrent use; a key read once is kept in
// memory.
type FleetKeys struct {
	kv   jetstream.KeyValue
	wrap *seal.Box

	mu   sync.Mutex
	keys map[string][]byte
}

// fleetKeysBucket holds the fleet's sealed keys.
const fleetKeysBucket = "CREWLET_FLEET_KEYS"

// fleetKeyBytes is every key's length: AES-256 and HMAC-SHA256 alike.
const fleetKeyBytes = 32

// OpenFleetKeys opens (or creates) the bucket of the fleet's keys beside
// the log, unsealed with a key derived from secret (the route secret;
// every node of the fleet must give the same). A fleet still forming is
// waited for, within ctx.
func (l *JetStreamLog) OpenFleetKeys(ctx context.Context, secret string) (*FleetKeys, error) {
	kv, err := l.durableBucket(ctx, fleetKeysBucket)
	if err != nil {
		return nil, err
	}
	wrapKey, err := hkdf.Key(sha256.New, []byte(secret), nil, "crewlet fleet keys v1", fleetKeyBytes)
	if err != nil {
		return nil, err
	}
	wrap, err := seal.New(wrapKey)
	if err != nil {
		return nil, err
	}
	return &FleetKeys{kv: kv, wrap: wrap, keys: map[string][]byte{}}, nil
}

// ErrFleetKeyUnreadable marks a key in the bucket this node cannot unseal:
// it was sealed under another route secret.
var ErrFleetKeyUnreadable = errors.New("state: a fleet key in the bucket was sealed under another route secret")

// Key answers the fleet's key called name (32 bytes), drawing and storing
// it if no node has yet. Two nodes drawing at once agree: the bucket keeps
// the first written, and the other reads it back.
func (k *FleetKeys) Key(ctx context.Context, name string) ([]byte, error) {
	k.mu.Lock()
	key, ok := k.keys[name]
	k.mu.Unlock()
	if ok {
		return key, nil
	}
	key, err := k.load(ctx, name)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys[name] = key
	return key, nil
}

func (k *FleetKeys) load(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, fleetKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	sealed, err := k.wrap.Seal(fresh, []byte(name))
	if err != nil {
		return nil, err
	}
	var key []byte
	err = untilReady(ctx, func(ctx context.Context) error {
		if _, err := k.kv.Create(ctx, name, sealed); err == nil {
			key = fresh
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		// Another node wrote it first. The copy of the bucket that answers
		// a read may not have applied that write yet (any copy may
		// answer), so not found is asked again until this attempt's
		// deadline, which untilReady retries as a fleet still forming.
		e, err := k.kv.Get(ctx, name)
		for errors.Is(err, jetstream.ErrKeyNotFound) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			e, err = k.kv.Get(ctx, name)
		}
		if err != nil {
			return err
		}
		key, err = k.wrap.Open(e.Value(), []byte(name))
		if err != nil {
			return fmt.Errorf("%w: %s", ErrFleetKeyUnreadable, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: the fleet's %s key: %w", name, err)
	}
	return key, nil
}
