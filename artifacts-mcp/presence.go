package artifacts

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// An agent working on an artifact is in its room (ART-6): a seat whose
// call was allowed shows there for PresenceTTL after its last call,
// viewing or editing, focused on what the call named. Rooms live in a
// TTL bucket on the node's own JetStream, so a seat that stops calling
// leaves by itself and nothing is replayed.

// roomsBucket is the coordination bucket presence is kept in.
const roomsBucket = "CREWLET_ARTIFACT_ROOMS"

// Presence is one seat in an artifact's room.
type Presence struct {
	Seat     string    `json:"seat"`
	Kind     string    `json:"kind"`
	Activity string    `json:"activity"` // viewing | editing
	Focus    string    `json:"focus,omitempty"`
	At       time.Time `json:"at"`
}

const (
	viewing = "viewing"
	editing = "editing"
)

func roomKey(id, seat string) string { return "room." + id + "." + seat }

// bucket opens the rooms bucket once it is first needed; a failure is
// tried again on the next call.
func (s *srv) bucket(ctx context.Context) (*state.TTLBucket, error) {
	s.roomMu.Lock()
	defer s.roomMu.Unlock()
	if s.rooms != nil {
		return s.rooms, nil
	}
	if s.w.Node() == nil {
		return nil, state.ErrNoCoordination
	}
	b, err := s.w.Node().TTLBucket(ctx, roomsBucket)
	if err != nil {
		return nil, err
	}
	s.rooms = b
	return b, nil
}

// enter puts an agent's allowed call in the artifact's room. People are
// shown by the dashboard they look through, not here. A coordination
// store that does not answer costs the room its entry, never the call.
func (s *srv) enter(ctx context.Context, c authority.Caller, id, activity, focus string) {
	if c.Kind != authority.KindAgent {
		return
	}
	ctx, cancel := ctxFor(ctx)
	defer cancel()
	b, err := s.bucket(ctx)
	if err == nil {
		v, _ := json.Marshal(Presence{Seat: c.Seat, Kind: string(c.Kind), Activity: activity, Focus: focus, At: s.w.Now().UTC()})
		err = b.Put(ctx, roomKey(id, c.Seat), v, s.d.PresenceTTL)
	}
	if err != nil {
		s.d.Logger.Warn("artifacts: presence not recorded", "artifact", id, "seat", c.Seat, "err", err)
	}
}

// room lists who is in an artifact's room now, by seat.
func (s *srv) room(ctx context.Context, id string) ([]Presence, error) {
	b, err := s.bucket(ctx)
	if err != nil {
		return nil, err
	}
	entries, err := b.Entries(ctx, "room."+id+".>")
	if err != nil {
		return nil, err
	}
	out := make([]Presence, 0, len(entries))
	for _, e := range entries {
		var p Presence
		if json.Unmarshal(e.Value, &p) == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seat < out[j].Seat })
	return out, nil
}
