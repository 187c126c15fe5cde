package serve

import (
	"context"
	"errors"
	"fmt"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
)

// seatRelay is the decisions' way to the node holding a seat (issue 27):
// the hub's question to the seat's holder, its answers named as the
// runtime reads them.
type seatRelay struct{ started func() *hub.Hub }

func (r seatRelay) AskSeatHolder(ctx context.Context, seat, kind string, question []byte) ([]byte, error) {
	h := r.started()
	if h == nil {
		return nil, agent.ErrNotFleet
	}
	reply, err := h.AskSeatHolder(ctx, seat, kind, question)
	switch {
	case errors.Is(err, hub.ErrNotFleet):
		return nil, agent.ErrNotFleet
	case errors.Is(err, hub.ErrNoHolder):
		return nil, fmt.Errorf("%w: %w", agent.ErrSeatNotHeld, err)
	case errors.Is(err, hub.ErrNoAnswer):
		return nil, fmt.Errorf("%w: %w", agent.ErrHolderSilent, err)
	}
	return reply, err
}
