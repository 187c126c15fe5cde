package agent

import (
	"context"
	"sort"

	"github.com/crewlet/hub/servers"
)

// Feed is one wake feed the runtime follows: rows first-party servers
// leave in the projection when somebody mentions a seat, asks it, hands
// it an item (TRK-4), changes a page it follows, or another seat asks it
// with a2a_ask. Every node holds the same rows in the same order.
type Feed struct {
	// Name is short and fixed (trk, kb, a2a): it names the feed in turn
	// keys and the seats' cursors, which are on the log.
	Name string
	// Read answers up to limit rows after cursor ("" for the first).
	Read func(after string, limit int) ([]servers.Wake, error)
	// Last is the cursor of the newest row ("" for none).
	Last func() (string, error)
	// Trigger reads what woke the seat.
	Trigger func(w servers.Wake) (Trigger, error)
	// Ended, if set, tells the feed's server how a turn it woke ended
	// when it reached nobody or could not run, so the people looking at
	// what woke it see why nobody answered (the item's activity).
	Ended func(ctx context.Context, rec TurnRecord) error
}

// Trigger is the text that woke a seat, who wrote it and what it is
// about, as the server that left the wake reads it back.
type Trigger = servers.Trigger

// lastOf is a Feed.Last over a Read: it pages to the end.
func lastOf(read func(after string, limit int) ([]servers.Wake, error)) func() (string, error) {
	return func() (string, error) {
		cursor := ""
		for {
			rows, err := read(cursor, 500)
			if err != nil {
				return "", err
			}
			if len(rows) == 0 {
				return cursor, nil
			}
			cursor = rows[len(rows)-1].Cursor
		}
	}
}

// FeedOf builds a Feed over a server's wake reader.
func FeedOf(name string, read func(after string, limit int) ([]servers.Wake, error), trigger func(servers.Wake) (Trigger, error)) Feed {
	return Feed{Name: name, Read: read, Last: lastOf(read), Trigger: trigger}
}

func sortByWoken(recs []TurnRecord) {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Woken.Before(recs[j].Woken) })
}
