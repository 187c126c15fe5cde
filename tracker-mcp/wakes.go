package tracker

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// wake is the row a projector leaves for a seat to be woken.
type wake struct {
	Seat    string    `json:"seat"`
	Item    string    `json:"item"`
	Comment int       `json:"comment"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Wake is a seat the tracker asks to be woken: named in a comment, put a
// question, or handed an item. Whoever runs turns reads them with Wakes and
// wakes each seat once per row.
type Wake struct {
	// Cursor orders wake rows; pass the last one read back to Wakes.
	Cursor  string    `json:"cursor"`
	Seat    string    `json:"seat"`
	Item    string    `json:"item"`
	Comment int       `json:"comment,omitempty"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Wakes answers up to limit wake rows after cursor ("" for the first), in
// the order they were written. Rows are projected from the log, so every
// node answers the same rows; the reader keeps its own cursor.
func Wakes(n *state.Node, after string, limit int) ([]Wake, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []Wake
	err := n.View(func(r pebble.Reader) error {
		lower := []byte(kWake)
		if after != "" {
			if strings.ContainsAny(after, "\x00") {
				return authority.Refuse(authority.Invalid, "after is not a wake cursor.")
			}
			lower = append([]byte(kWake+after), 0)
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper(kWake)})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid() && len(out) < limit; it.Next() {
			var w wake
			if err := json.Unmarshal(it.Value(), &w); err != nil {
				return err
			}
			out = append(out, Wake{Cursor: strings.TrimPrefix(string(it.Key()), kWake), Seat: w.Seat, Item: w.Item, Comment: w.Comment, By: w.By, At: w.At})
		}
		return nil
	})
	return out, err
}
