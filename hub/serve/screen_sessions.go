package serve

import (
	"context"
	"errors"
	"time"

	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/servers/state"
)

// screenSessionsBucket is where the screen's sign-ins are kept: a bucket
// on disk beside the log, so a sign-in outlives a restart and every node
// of a fleet honours it (issue 26, item 3).
const screenSessionsBucket = "CREWLET_SCREEN_SESSIONS"

// screenSessions keeps the screen's sign-ins in a node's durable TTL
// bucket.
type screenSessions struct{ b *state.TTLBucket }

func openScreenSessions(ctx context.Context, node *state.Node) (screenSessions, error) {
	b, err := node.DurableTTLBucket(ctx, screenSessionsBucket)
	return screenSessions{b}, err
}

func (s screenSessions) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.b.Put(ctx, key, value, ttl)
}

func (s screenSessions) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.b.Get(ctx, key)
	if errors.Is(err, state.ErrNoKey) {
		return nil, screen.ErrNoSession
	}
	return e.Value, err
}

// Delete forgets a sign-in at whatever revision it holds: a session is
// written once, so there is no other writer to lose a race to.
func (s screenSessions) Delete(ctx context.Context, key string) error {
	e, err := s.b.Get(ctx, key)
	if errors.Is(err, state.ErrNoKey) {
		return nil
	}
	if err != nil {
		return err
	}
	err = s.b.Delete(ctx, key, e.Revision)
	if errors.Is(err, state.ErrKeyMoved) {
		// Expired between the read and the delete: gone either way.
		return nil
	}
	return err
}
