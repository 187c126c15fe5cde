package servers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Wake is a seat a first-party server asks to be woken (TRK-4): somebody
// mentioned it, put it a question, handed it an item, or changed a page it
// follows. Projectors leave wake rows in the projection, so every node
// holds the same ones; whoever runs turns reads them with Wakes, keeps its
// own cursor, and wakes each seat once per row.
type Wake struct {
	// Cursor orders wake rows within one server's feed; pass the last one
	// read back to Wakes. Set on read.
	Cursor string `json:"cursor,omitempty"`
	Seat   string `json:"seat"`
	// Subject is what the wake is about: an item's key, a page's id.
	Subject string `json:"subject"`
	// Comment is the comment that woke the seat, if one did.
	Comment int       `json:"comment,omitempty"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Wake leaves a wake row for seat about subject under prefix, the
// server's own feed ("trk/wake/"). It is keyed by the operation's position
// and a row number, so the feed is in log order on every node.
func (a *Apply) Wake(prefix, seat, subject string, comment int) error {
	w := Wake{Seat: seat, Subject: subject, Comment: comment, By: a.By.Seat, At: a.At()}
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return a.B.Set(fmt.Appendf(nil, "%s%016x/%04d", prefix, a.Pos, a.Seq()), b, nil)
}

// Wakes answers up to limit wake rows of the feed under prefix after
// cursor ("" for the first), in the order they were written.
func Wakes(n *state.Node, prefix, after string, limit int) ([]Wake, error) {
	if limit <= 0 {
		limit = 100
	}
	var out []Wake
	err := n.View(func(r pebble.Reader) error {
		lower := []byte(prefix)
		if after != "" {
			if strings.ContainsAny(after, "\x00") {
				return authority.Refuse(authority.Invalid, "after is not a wake cursor.")
			}
			lower = append([]byte(prefix+after), 0)
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte(prefix + "\xff")})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid() && len(out) < limit; it.Next() {
			var w Wake
			if err := json.Unmarshal(it.Value(), &w); err != nil {
				return err
			}
			w.Cursor = strings.TrimPrefix(string(it.Key()), prefix)
			out = append(out, w)
		}
		return nil
	})
	return out, err
}

// Trigger is what woke a seat, read back from the server that left the
// wake: the text, who wrote it, and in a phrase what it is about ("a
// comment on CORE-1 (Fix the login)"). The agent runtime shows the text to
// the seat's model fenced as its writers'.
type Trigger struct {
	Text   string
	Author Author
	About  string
}
