package tracker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// A person's own queue (OPS-3): the live items assigned to them, in the
// order they chose. The order is theirs alone — nobody else's priorities
// are set through it — and is a whole value: the keys named come first, in
// that order, and the rest of the queue after them, newest first.

const maxQueue = 200

// ---- order_my_queue ----

type orderQueueIn struct {
	Keys []string `json:"keys" jsonschema:"keys of items assigned to you, in the order you will work them"`
	servers.OpIDArg
}

type queuePayload struct {
	Owner string   `json:"owner"`
	Items []string `json:"items"` // item ids: a key changes on a move
}

type queueOut struct {
	servers.WriteOut
	// Provenance names who wrote the queue's titles, each fenced as
	// theirs (WR-10), as list_work_items answers them.
	Provenance *servers.Provenance `json:"provenance,omitempty"`
	Queue      []summary           `json:"queue,omitempty"`
}

func (s *srv) orderMyQueue(ctx context.Context, c authority.Caller, in orderQueueIn) (queueOut, error) {
	if err := person(c, "a queue"); err != nil {
		return queueOut{}, err
	}
	if len(in.Keys) > maxQueue {
		return queueOut{}, authority.Refuse(authority.Invalid, "keys lists %d items; a queue is ordered %d at a time at most.", len(in.Keys), maxQueue)
	}
	call, err := s.w.Begin(c, "order_my_queue", &in, true)
	if err != nil {
		return queueOut{}, err
	}
	pl := queuePayload{Owner: inboxOwner(c.Seat), Items: []string{}}
	wo, _, err := servers.Write[struct{}](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		pl.Items = pl.Items[:0]
		cat, err := readCatalogue(r)
		if err != nil {
			return servers.Intent{}, err
		}
		for _, k := range in.Keys {
			it, err := readItem(r, k)
			if err != nil {
				return servers.Intent{}, err
			}
			switch {
			case it == nil:
				return servers.Intent{}, authority.Refuse(authority.Invalid, "keys names %s, which is no work item.", k)
			case !strings.EqualFold(it.Assignee, c.Seat):
				return servers.Intent{}, authority.Refuse(authority.Invalid, "%s is assigned to %s, not you; your queue holds only your own items.", it.Key, orNone(it.Assignee))
			case !cat.live(it.Status):
				return servers.Intent{}, authority.Refuse(authority.Invalid, "%s is %s, no longer live work; your queue holds open and started items.", it.Key, it.Status)
			case slices.Contains(pl.Items, it.ID):
				return servers.Intent{}, authority.Refuse(authority.Invalid, "keys names %s twice.", it.Key)
			}
			pl.Items = append(pl.Items, it.ID)
		}
		return servers.Intent{Kind: kindQueue, Payload: pl, What: "the order of your queue"}, nil
	})
	if err != nil {
		return queueOut{}, err
	}
	out := queueOut{WriteOut: wo}
	err = s.w.View(func(r pebble.Reader) error {
		rows, err := readQueue(r, c.Seat)
		if err != nil || len(rows) == 0 {
			return err
		}
		e := envelope()
		for _, row := range rows {
			sm, err := row.answer(r, e)
			if err != nil {
				return err
			}
			out.Queue = append(out.Queue, sm)
		}
		p := e.Provenance()
		out.Provenance = &p
		return nil
	})
	return out, err
}

// readQueue is seat's queue as it stands: the live items assigned to it,
// those it ordered first.
func readQueue(r pebble.Reader, seat string) ([]summaryRow, error) {
	cat, err := readCatalogue(r)
	if err != nil {
		return nil, err
	}
	var live []summaryRow
	prefix := kIxAssign + seat + "/"
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return nil, err
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		projNum := strings.TrimPrefix(string(it.Key()), prefix)
		proj, num, _ := strings.Cut(projNum, "/")
		var n int
		if _, err := fmt.Sscanf(num, "%d", &n); err != nil {
			continue
		}
		var sum summaryRow
		found, err := indexedSummary(r, it.Value(), proj, n, &sum)
		if err != nil {
			it.Close()
			return nil, err
		}
		if found && cat.live(sum.Status) {
			live = append(live, sum)
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	var order queuePayload
	if _, err := state.GetJSON(r, kQueue+inboxOwner(seat), &order); err != nil {
		return nil, err
	}
	rank := func(s summaryRow) int {
		if i := slices.Index(order.Items, s.ID); i >= 0 {
			return i
		}
		return len(order.Items)
	}
	slices.SortStableFunc(live, func(a, b summaryRow) int { return rank(a) - rank(b) })
	return live, nil
}

func applyQueue(a *applier) (any, error) {
	var pl queuePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	if err := state.SetJSON(a.B, kQueue+pl.Owner, pl); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}
