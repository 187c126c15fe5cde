package hub

import (
	"context"
	"crypto/rand"
)

// The names of the keys a node signs and seals with. In a fleet each is
// the fleet's, one for every node (Fleet.Keys, state.FleetKeys), so what
// one node signed or sealed another opens; alone, the node draws its own
// each start.
const (
	// keyOperatorSessions signs the 2025 operator sessions' ids.
	keyOperatorSessions = "operator_sessions"
	// keyInputRounds seals the requestState a 2026-07-28 client carries
	// from one round of a call to the next (input_rounds.go).
	keyInputRounds = "input_rounds"
	// keyOAuthGrants seals the seats' upstream OAuth grants in the
	// fleet's grants bucket (upstream_oauth.go).
	keyOAuthGrants = "oauth_grants"
)

// nodeKey answers the key called name: the fleet's, or one drawn now.
func nodeKey(ctx context.Context, f *Fleet, name string) ([]byte, error) {
	if f != nil && f.Keys != nil {
		return f.Keys.Key(ctx, name)
	}
	key := make([]byte, 32)
	_, err := rand.Read(key)
	return key, err
}
