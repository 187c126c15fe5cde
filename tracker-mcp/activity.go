package tracker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// activity is one row of the feed.
type activity struct {
	ID    string         `json:"id"`
	At    time.Time      `json:"at"`
	Actor servers.Author `json:"actor"`
	// OperatorID is the credential the change came through (OPS-4).
	OperatorID string          `json:"operator_id,omitempty"`
	Action     string          `json:"action"`
	Project    string          `json:"project,omitempty"`
	Item       string          `json:"item,omitempty"`
	Summary    string          `json:"summary"`
	Detail     json.RawMessage `json:"detail,omitempty"` // the change record, texts included
	// ByHub marks a change record the hub wrote itself (how a seat's
	// turn ended and why): none of it is the actor's words.
	ByHub bool `json:"by_hub,omitempty"`
}

// ---- list_activity / get_activity ----

type listActivityIn struct {
	Project string `json:"project,omitempty" jsonschema:"only this project's activity"`
	Item    string `json:"item,omitempty" jsonschema:"only this item's activity"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many rows, 1 to 200; default 50"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page"`
}

type activityRow struct {
	ID         string `json:"id"`
	At         string `json:"at"`
	Actor      string `json:"actor"`
	OperatorID string `json:"operator_id,omitempty"`
	Action     string `json:"action"`
	Project    string `json:"project,omitempty"`
	Item       string `json:"item,omitempty"`
	Summary    string `json:"summary"`
}

type listActivityOut struct {
	Activity   []activityRow `json:"activity"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// listActivityScan bounds how many rows one page may pass over when filters
// match few of them; the cursor lets the caller go on.
const listActivityScan = 20000

func (s *srv) listActivity(_ context.Context, _ authority.Caller, in listActivityIn) (listActivityOut, error) {
	limit, err := servers.PageLimit(in.Limit, 50, 200)
	if err != nil {
		return listActivityOut{}, err
	}
	out := listActivityOut{Activity: []activityRow{}}
	err = s.w.View(func(r pebble.Reader) error {
		item := ""
		if in.Item != "" {
			it, err := readItem(r, in.Item)
			if err != nil {
				return err
			}
			if it == nil {
				return authority.Refuse(authority.Invalid, "item %s names no work item.", in.Item)
			}
			item = it.Key
		}
		upper := []byte(kActivity + "\xff")
		if in.Cursor != "" {
			b, err := base64.RawURLEncoding.DecodeString(in.Cursor)
			if err != nil || !strings.HasPrefix(string(b), kActivity) {
				return authority.Refuse(authority.Invalid, "cursor is not a next_cursor list_activity answered.")
			}
			upper = b
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kActivity), UpperBound: upper})
		if err != nil {
			return err
		}
		defer it.Close()
		scanned := 0
		for ok := it.Last(); ok; ok = it.Prev() {
			scanned++
			if len(out.Activity) == limit || scanned > listActivityScan {
				// The cursor is an exclusive upper bound, so it points just
				// past this row, which the next page starts with.
				out.NextCursor = base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), it.Key()...), 0))
				break
			}
			var a activity
			if err := state.DecodeJSON(it.Key(), it.Value(), &a); err != nil {
				return err
			}
			if (in.Project != "" && !strings.EqualFold(a.Project, in.Project)) || (item != "" && a.Item != item) {
				continue
			}
			out.Activity = append(out.Activity, activityRow{ID: a.ID, At: a.At.Format("2006-01-02T15:04:05.000Z07:00"), Actor: a.Actor.Seat, OperatorID: a.OperatorID, Action: a.Action, Project: a.Project, Item: a.Item, Summary: a.Summary})
		}
		return nil
	})
	return out, err
}

type getActivityIn struct {
	ID string `json:"id" jsonschema:"an activity id from list_activity (act_...)"`
}

type getActivityOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Activity   activityRow        `json:"activity"`
	Actor      servers.Author     `json:"actor"`
	Change     json.RawMessage    `json:"change,omitempty"`
}

func (s *srv) getActivity(_ context.Context, _ authority.Caller, in getActivityIn) (getActivityOut, error) {
	var out getActivityOut
	err := s.w.View(func(r pebble.Reader) error {
		id, ok := strings.CutPrefix(in.ID, "act_")
		var a activity
		found := false
		if ok {
			var err error
			found, err = state.GetJSON(r, kActivity+id, &a)
			if err != nil {
				return err
			}
		}
		if !found {
			return authority.Refuse(authority.NotFound, "No activity has the id %q.", in.ID)
		}
		e := envelope()
		out.Activity = activityRow{ID: a.ID, At: a.At.Format("2006-01-02T15:04:05.000Z07:00"), Actor: a.Actor.Seat, OperatorID: a.OperatorID, Action: a.Action, Project: a.Project, Item: a.Item, Summary: a.Summary}
		out.Actor = a.Actor
		switch {
		case len(a.Detail) > 0 && a.ByHub:
			// The hub's own sentences are not somebody else's text:
			// fencing them would tell the reader a seat wrote them.
			out.Change = a.Detail
		case len(a.Detail) > 0:
			// The change record can hold text the actor wrote; every
			// string in it is fenced as theirs.
			var v any
			if err := json.Unmarshal(a.Detail, &v); err != nil {
				return err
			}
			b, err := json.Marshal(fenceStrings(e, v, a.Actor))
			if err != nil {
				return err
			}
			out.Change = b
		}
		out.Provenance = e.Provenance()
		return nil
	})
	return out, err
}

// fenceStrings fences, as w's, every string in a change record that could
// be prose somebody wrote.
func fenceStrings(e *servers.Envelope, v any, w servers.Author) any {
	switch t := v.(type) {
	case string:
		if len(t) > 40 || strings.ContainsAny(t, "\n ") {
			return e.Fence(t, []servers.Author{w})
		}
		return t
	case map[string]any:
		for k, x := range t {
			t[k] = fenceStrings(e, x, w)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = fenceStrings(e, x, w)
		}
		return t
	default:
		return v
	}
}
