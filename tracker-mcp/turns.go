package tracker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// A seat's turn woken by an item that ended without reaching anybody (the
// delivery fence), or that could not run, says so on the item's activity
// feed: the person who woke it sees why nobody answered, beside the item's
// other activity.

const kindTurnEnded = "tracker.turn.ended"

// turnNote is how a seat's turn about an item ended, on the item. The
// reason is the runtime's sentence, not the seat's: unfenced, as on the
// activity row.
type turnNote struct {
	Seat    string    `json:"seat"`
	Turn    string    `json:"turn"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
}

type turnEndedPayload struct {
	Key     string `json:"key"`
	Turn    string `json:"turn"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

func applyTurnEnded(a *applier) (any, error) {
	var pl turnEndedPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	it, err := readItem(a.R, pl.Key)
	if err != nil || it == nil {
		// The item went away (merged into nothing, moved out of reach):
		// there is no feed row to write, and nothing to refuse.
		return nil, err
	}
	sum := fmt.Sprintf("@%s's turn about %s ended %s", a.By.Seat, it.Key, pl.Outcome)
	if pl.Reason != "" {
		// Why, on the line itself: the feed's list is where a person
		// looks, and "ended failed" alone gives them nothing to mend.
		sum += ": " + pl.Reason
	}
	// On the item too, where get_work_item shows it. Only the item's own
	// row changes: not its version (a turn's end is no edit that a
	// writer's if_match should trip on), its summary or its indexes.
	it.LastFailedTurn = &turnNote{Seat: a.By.Seat, Turn: pl.Turn, Outcome: pl.Outcome, Reason: pl.Reason, At: a.At()}
	if err := state.SetJSON(a.B, kItem+it.Key, it); err != nil {
		return nil, err
	}
	// The reason is the runtime's sentence, not the seat's: the row is
	// the hub's, unfenced.
	return nil, a.hubActivity("turn_"+pl.Outcome, it.Project, it.Key, sum, map[string]any{"turn": pl.Turn, "outcome": pl.Outcome, "reason": pl.Reason})
}

// NoteTurnEnded records on an item's activity how a seat's turn about it
// ended (undelivered, budget_exhausted, ...), once per turn: the
// operation's id is derived from the turn, so a re-run notes nothing new.
// caller is the seat inside the turn; woken is when the turn was woken.
func NoteTurnEnded(ctx context.Context, n *state.Node, caller authority.Caller, woken time.Time, key, outcome, reason string) error {
	args, err := json.Marshal(map[string]string{"turn": caller.TurnKey})
	if err != nil {
		return err
	}
	body, err := json.Marshal(turnEndedPayload{Key: key, Turn: caller.TurnKey, Outcome: outcome, Reason: state.ClipDiagnostic(reason)})
	if err != nil {
		return err
	}
	_, err = n.Write(ctx, state.Op{ID: state.DeriveOpID(caller.TurnKey, woken, kindTurnEnded, args), Tool: kindTurnEnded,
		Args: args, Kind: kindTurnEnded, Payload: body, Caller: caller})
	return err
}
