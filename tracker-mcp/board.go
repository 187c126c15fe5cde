package tracker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// The board drag (OPS-3): a project's board shows a column per status, each
// in its own order. Dragging a card moves it across columns (its status,
// as update_work_item changes it) and within one (its place, which nothing
// else changes). An item never dragged sits by its number, so a column
// reads oldest first until somebody orders it.

// maxColumn bounds the column a drag places a card in: past it, the drag
// is refused rather than read whole.
const maxColumn = 5000

// boardRank is where an item sits in its column.
func boardRank(s summary) float64 {
	if s.Rank != nil {
		return *s.Rank
	}
	return float64(s.Number())
}

// Number is the item's number, read off its key.
func (s summary) Number() int {
	_, n, _ := parseKey(s.Key)
	return n
}

// column is a project's column of a status, in board order.
func column(r pebble.Reader, proj, status string) ([]summary, error) {
	prefix := kIxStatus + proj + "/" + status + "/"
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return nil, err
	}
	var out []summary
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == maxColumn {
			it.Close()
			return nil, authority.Refuse(authority.Invalid, "The %s column of %s holds more than %d items, more than a drag places a card among; use update_work_item to change the status.", status, proj, maxColumn)
		}
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(string(it.Key()), prefix), "%d", &n); err != nil {
			continue
		}
		var s summary
		found, err := indexedSummary(r, it.Value(), proj, n, &s)
		if err != nil {
			it.Close()
			return nil, err
		}
		if found {
			out = append(out, s)
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b summary) int { return cmp.Compare(boardRank(a), boardRank(b)) })
	return out, nil
}

// ---- move_on_board ----

type boardIn struct {
	Key     string `json:"key" jsonschema:"the item whose card is dragged"`
	Status  string `json:"status,omitempty" jsonschema:"the column it is dropped in; default its own"`
	Before  string `json:"before,omitempty" jsonschema:"the key of the card it is dropped above"`
	After   string `json:"after,omitempty" jsonschema:"the key of the card it is dropped below"`
	IfMatch int    `json:"if_match,omitempty" jsonschema:"the version you read; refused if the item changed since"`
	servers.OpIDArg
}

type boardPayload struct {
	Key     string  `json:"key"`
	IfMatch int     `json:"if_match,omitempty"`
	Status  string  `json:"status"`
	Rank    float64 `json:"rank"`
}

type boardOut struct {
	servers.WriteOut
	Key     string   `json:"key,omitempty"`
	Status  string   `json:"status,omitempty"`
	Version int      `json:"version,omitempty"`
	Column  []string `json:"column,omitempty"`
}

func (s *srv) moveOnBoard(ctx context.Context, c authority.Caller, in boardIn) (boardOut, error) {
	if err := notASeat(c, "the board drag"); err != nil {
		return boardOut{}, err
	}
	if in.Before != "" && in.After != "" {
		return boardOut{}, authority.Refuse(authority.Invalid, "Send before or after, not both: a card is dropped next to one other card.")
	}
	call, err := s.w.Begin(c, "move_on_board", &in, false)
	if err != nil {
		return boardOut{}, err
	}
	var pl boardPayload
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		it, err := readItem(r, in.Key)
		if err != nil {
			return servers.Intent{}, err
		}
		if it == nil {
			return servers.Intent{}, authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		if err := checkEditable(it, in.IfMatch); err != nil {
			return servers.Intent{}, err
		}
		pl = boardPayload{Key: it.Key, IfMatch: in.IfMatch, Status: cmp.Or(in.Status, it.Status)}
		cat, err := readCatalogue(r)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := cat.checkStatus(pl.Status); err != nil {
			return servers.Intent{}, err
		}
		if pl.Status == it.Status && in.Before == "" && in.After == "" {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "The drag names no other column (status) and no card to drop next to (before, after); nothing would move.")
		}
		col, err := column(r, it.Project, pl.Status)
		if err != nil {
			return servers.Intent{}, err
		}
		col = slices.DeleteFunc(col, func(s summary) bool { return s.Key == it.Key })
		if pl.Rank, err = dropRank(r, col, in.Before, in.After, pl.Status); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindBoard, Payload: pl, What: "the move of " + it.Key + " on the board"}, nil
	})
	if err != nil {
		return boardOut{}, err
	}
	out := boardOut{WriteOut: wo, Key: pl.Key, Status: pl.Status}
	if res != nil {
		out.Key, out.Version = res.Key, res.Version
	}
	err = s.w.View(func(r pebble.Reader) error {
		it, err := readItem(r, out.Key)
		if err != nil || it == nil {
			return err
		}
		col, err := column(r, it.Project, it.Status)
		if err != nil {
			return err
		}
		out.Status, out.Version = it.Status, it.Version
		for _, s := range col {
			out.Column = append(out.Column, s.Key)
		}
		return nil
	})
	return out, err
}

// dropRank is the rank a card dropped next to before or after (or, naming
// neither, at the bottom) takes in col, a column without the card.
func dropRank(r pebble.Reader, col []summary, before, after, status string) (float64, error) {
	if len(col) == 0 {
		if before != "" || after != "" {
			return 0, authority.Refuse(authority.Invalid, "The %s column is empty here, so no card is there to drop next to; leave before and after out.", status)
		}
		return 1, nil
	}
	next := before
	if next == "" {
		next = after
	}
	if next == "" {
		return boardRank(col[len(col)-1]) + 1, nil
	}
	target, err := readItem(r, next)
	if err != nil {
		return 0, err
	}
	i := -1
	if target != nil {
		i = slices.IndexFunc(col, func(s summary) bool { return s.Key == target.Key })
	}
	if i < 0 {
		return 0, authority.Refuse(authority.Invalid, "%s is no other card of the %s column of this project; drop next to one that is.", next, status)
	}
	at := boardRank(col[i])
	if before != "" {
		if i == 0 {
			return at - 1, nil
		}
		return (boardRank(col[i-1]) + at) / 2, nil
	}
	if i == len(col)-1 {
		return at + 1, nil
	}
	return (at + boardRank(col[i+1])) / 2, nil
}

func applyBoard(a *applier) (any, error) {
	var pl boardPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	if err := checkEditable(old, pl.IfMatch); err != nil {
		return nil, err
	}
	cat, err := readCatalogue(a.R)
	if err != nil {
		return nil, err
	}
	if err := cat.checkStatus(pl.Status); err != nil {
		return nil, err
	}
	it := clone(old)
	var changed []string
	if pl.Status != it.Status {
		changed = append(changed, "status")
		a.history(it, "status", it.Status+" -> "+pl.Status+" (on the board)")
		it.Status = pl.Status
	}
	if it.Rank == nil || *it.Rank != pl.Rank {
		changed = append(changed, "board_position")
		a.history(it, "board_position", "moved within the "+it.Status+" column")
		it.Rank = &pl.Rank
	}
	it.Version++
	it.UpdatedAt = a.At()
	if err := a.putItem(old, it); err != nil {
		return nil, err
	}
	if err := a.activity("moved_on_board", it.Project, it.Key, fmt.Sprintf("moved %s on the board (%s)", it.Key, strings.Join(changed, ", ")), map[string]any{"status": it.Status}); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, Status: it.Status, Changed: changed}, nil
}
