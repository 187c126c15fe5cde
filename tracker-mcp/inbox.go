package tracker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// A person's inbox and pins (OPS-3). Every time the board names a seat —
// a mention, a question put to it, an item handed to it — the projector
// leaves an entry in that seat's inbox beside the wake it leaves. The
// projector cannot tell a person's seat from an agent's (the directory is
// not part of the log), so every seat gets entries; only a person reads
// them, on the operator surface, and the ceiling bounds what an unread
// inbox holds either way.
//
// The inbox list — its unread entries and its pinned items together — has
// a ceiling. Past it, what arrives is counted, not kept, and a pin is
// refused inbox_full: marking older entries read makes room. Read entries
// stay listed until there are keptRead of them, oldest dropped first.

const (
	inboxCeiling = 100
	keptRead     = 100
)

type inboxEntry struct {
	ID      string    `json:"id"`
	Item    string    `json:"item"`   // the item's id: a key changes on a move
	Key     string    `json:"key"`    // the item's key when the entry arrived
	Reason  string    `json:"reason"` // mentioned, asked, assigned
	Comment int       `json:"comment,omitempty"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Read    bool      `json:"read,omitempty"`
}

// inboxMeta counts a seat's inbox list.
type inboxMeta struct {
	Unread int `json:"unread"`
	Pinned int `json:"pinned"`
	// Missed counts entries that arrived while the list was at its
	// ceiling, and were not kept.
	Missed int `json:"missed,omitempty"`
	Read   int `json:"read,omitempty"`
}

func (m inboxMeta) full() bool { return m.Unread+m.Pinned >= inboxCeiling }

type pin struct {
	Item string    `json:"item"`
	Key  string    `json:"key"`
	At   time.Time `json:"at"`
}

func inboxPrefix(owner string) string { return kInbox + inboxOwner(owner) + "/" }
func pinPrefix(owner string) string   { return kPin + inboxOwner(owner) + "/" }

func readInboxMeta(r pebble.Reader, owner string) (inboxMeta, error) {
	var m inboxMeta
	_, err := state.GetJSON(r, kInboxMeta+inboxOwner(owner), &m)
	return m, err
}

// inboxFull refuses adding to a list at its ceiling; the tool and the
// projector both ask it.
func inboxFull(m inboxMeta) error {
	if m.full() {
		return authority.Refuse(authority.InboxFull, "Your inbox list holds %d unread entries and %d pins, its ceiling of %d. Mark older entries read (mark_inbox_read) to make room, then pin again.", m.Unread, m.Pinned, inboxCeiling).
			WithData("ceiling", inboxCeiling)
	}
	return nil
}

// deliver leaves an inbox entry for seat about it, unless the seat wrote
// the change itself.
func (a *applier) deliver(seat string, it *item, reason string, comment int) error {
	if seat == "" || strings.EqualFold(seat, a.By.Seat) {
		return nil
	}
	m, err := readInboxMeta(a.R, seat)
	if err != nil {
		return err
	}
	if m.full() {
		m.Missed++
		return state.SetJSON(a.B, kInboxMeta+inboxOwner(seat), m)
	}
	id := fmt.Sprintf("%016x.%04d", a.Pos, a.Seq())
	e := inboxEntry{ID: "in_" + id, Item: it.ID, Key: it.Key, Reason: reason, Comment: comment, By: a.By.Seat, At: a.At()}
	if err := state.SetJSON(a.B, inboxPrefix(seat)+id, e); err != nil {
		return err
	}
	m.Unread++
	return state.SetJSON(a.B, kInboxMeta+inboxOwner(seat), m)
}

// ---- list_inbox ----

type listInboxIn struct {
	UnreadOnly bool `json:"unread_only,omitempty" jsonschema:"leave out entries already read"`
}

type inboxRow struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Title   string `json:"title,omitempty"`
	Reason  string `json:"reason"`
	Comment int    `json:"comment,omitempty"`
	By      string `json:"by"`
	At      string `json:"at"`
	Read    bool   `json:"read"`
}

type pinRow struct {
	Key    string `json:"key"`
	Title  string `json:"title,omitempty"`
	Status string `json:"status,omitempty"`
	At     string `json:"pinned_at"`
}

type listInboxOut struct {
	// Provenance names who wrote the titles, each fenced as theirs
	// (WR-10), as list_work_items answers them.
	Provenance servers.Provenance `json:"provenance"`
	Entries    []inboxRow         `json:"entries"`
	Pinned     []pinRow           `json:"pinned"`
	Unread     int                `json:"unread"`
	Ceiling    int                `json:"ceiling"`
	Missed     int                `json:"missed,omitempty"`
	Note       string             `json:"note,omitempty"`
}

func (s *srv) listInbox(_ context.Context, c authority.Caller, in listInboxIn) (listInboxOut, error) {
	if err := person(c, "an inbox"); err != nil {
		return listInboxOut{}, err
	}
	out := listInboxOut{Entries: []inboxRow{}, Pinned: []pinRow{}, Ceiling: inboxCeiling}
	env := envelope()
	err := s.w.View(func(r pebble.Reader) error {
		m, err := readInboxMeta(r, c.Seat)
		if err != nil {
			return err
		}
		out.Unread, out.Missed = m.Unread, m.Missed
		if m.Missed > 0 {
			out.Note = fmt.Sprintf("%d entries arrived while the inbox list was at its ceiling and were not kept; mark entries read to make room.", m.Missed)
		}
		var entries []inboxEntry
		if err := eachJSON(r, inboxPrefix(c.Seat), func(e inboxEntry) { entries = append(entries, e) }); err != nil {
			return err
		}
		// Newest first, unread before read.
		for _, read := range []bool{false, true} {
			for i := len(entries) - 1; i >= 0; i-- {
				e := entries[i]
				if e.Read != read || (read && in.UnreadOnly) {
					continue
				}
				row := inboxRow{ID: e.ID, Key: e.Key, Reason: e.Reason, Comment: e.Comment, By: e.By, At: e.At.Format(time.RFC3339Nano), Read: e.Read}
				if it, err := readItem(r, e.Item); err != nil {
					return err
				} else if it != nil {
					row.Key, row.Title = it.Key, env.Fence(it.Title, it.titleWriters())
				}
				out.Entries = append(out.Entries, row)
			}
		}
		return eachJSON(r, pinPrefix(c.Seat), func(p pin) {
			row := pinRow{Key: p.Key, At: p.At.Format(time.RFC3339Nano)}
			if it, _ := readItem(r, p.Item); it != nil {
				row.Key, row.Title, row.Status = it.Key, env.Fence(it.Title, it.titleWriters()), it.Status
			}
			out.Pinned = append(out.Pinned, row)
		})
	})
	out.Provenance = env.Provenance()
	return out, err
}

// ---- mark_inbox_read ----

type markReadIn struct {
	IDs []string `json:"ids,omitempty" jsonschema:"the entries to mark read (in_... ids from list_inbox)"`
	All bool     `json:"all,omitempty" jsonschema:"true: mark every entry read"`
	servers.OpIDArg
}

type markReadPayload struct {
	Owner string   `json:"owner"`
	IDs   []string `json:"ids,omitempty"`
	All   bool     `json:"all,omitempty"`
}

type markReadOut struct {
	servers.WriteOut
	Marked int `json:"marked"`
	Unread int `json:"unread"`
}

type markReadResult struct {
	Marked int `json:"marked"`
	Unread int `json:"unread"`
}

const maxMarkIDs = inboxCeiling + keptRead

func (s *srv) markInboxRead(ctx context.Context, c authority.Caller, in markReadIn) (markReadOut, error) {
	if err := person(c, "an inbox"); err != nil {
		return markReadOut{}, err
	}
	switch {
	case in.All == (len(in.IDs) > 0):
		return markReadOut{}, authority.Refuse(authority.Invalid, "Send either ids (the entries to mark read) or all: true, not both and not neither.")
	case len(in.IDs) > maxMarkIDs:
		return markReadOut{}, authority.Refuse(authority.Invalid, "ids lists %d entries; an inbox holds at most %d.", len(in.IDs), maxMarkIDs)
	}
	call, err := s.w.Begin(c, "mark_inbox_read", &in, false)
	if err != nil {
		return markReadOut{}, err
	}
	pl := markReadPayload{Owner: inboxOwner(c.Seat), IDs: dedupe(in.IDs), All: in.All}
	wo, res, err := servers.Write[markReadResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		for _, id := range pl.IDs {
			if _, err := inboxEntryOf(r, pl.Owner, id); err != nil {
				return servers.Intent{}, err
			}
		}
		return servers.Intent{Kind: kindInboxRead, Payload: pl, What: "the inbox change"}, nil
	})
	if err != nil {
		return markReadOut{}, err
	}
	out := markReadOut{WriteOut: wo}
	if res != nil {
		out.Marked, out.Unread = res.Marked, res.Unread
	}
	return out, nil
}

// inboxEntryOf reads one of owner's entries by its id; an id that is none
// of theirs is not found (somebody else's entry is not told apart).
func inboxEntryOf(r pebble.Reader, owner, id string) (*inboxEntry, error) {
	raw, ok := strings.CutPrefix(id, "in_")
	var e inboxEntry
	found := false
	if ok && !strings.ContainsAny(raw, "/\x00") {
		var err error
		if found, err = state.GetJSON(r, inboxPrefix(owner)+raw, &e); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, authority.Refuse(authority.NotFound, "Your inbox has no entry %q (list_inbox shows them).", id)
	}
	return &e, nil
}

func applyInboxRead(a *applier) (any, error) {
	var pl markReadPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	m, err := readInboxMeta(a.R, pl.Owner)
	if err != nil {
		return nil, err
	}
	var entries []inboxEntry
	if pl.All {
		if err := eachJSON(a.R, inboxPrefix(pl.Owner), func(e inboxEntry) { entries = append(entries, e) }); err != nil {
			return nil, err
		}
	} else {
		for _, id := range pl.IDs {
			e, err := inboxEntryOf(a.R, pl.Owner, id)
			if err != nil {
				return nil, err
			}
			entries = append(entries, *e)
		}
	}
	marked := 0
	for _, e := range entries {
		if e.Read {
			continue
		}
		e.Read = true
		marked++
		if err := state.SetJSON(a.B, inboxPrefix(pl.Owner)+strings.TrimPrefix(e.ID, "in_"), e); err != nil {
			return nil, err
		}
	}
	m.Unread -= marked
	m.Read += marked
	if err := a.dropOldRead(pl.Owner, &m); err != nil {
		return nil, err
	}
	if err := state.SetJSON(a.B, kInboxMeta+pl.Owner, m); err != nil {
		return nil, err
	}
	return markReadResult{Marked: marked, Unread: m.Unread}, nil
}

// dropOldRead deletes the oldest read entries past keptRead. The reader
// sees the batch, so entries just marked read count as read.
func (a *applier) dropOldRead(owner string, m *inboxMeta) error {
	excess := m.Read - keptRead
	if excess <= 0 {
		return nil
	}
	var drop []string
	err := eachJSON(a.R, inboxPrefix(owner), func(e inboxEntry) {
		if e.Read && len(drop) < excess {
			drop = append(drop, inboxPrefix(owner)+strings.TrimPrefix(e.ID, "in_"))
		}
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := a.B.Delete([]byte(k), nil); err != nil {
			return err
		}
	}
	m.Read -= len(drop)
	return nil
}

// ---- pin_work_item ----

type pinIn struct {
	Key   string `json:"key" jsonschema:"the item to pin (or unpin)"`
	Unpin bool   `json:"unpin,omitempty" jsonschema:"true: take the pin off"`
	servers.OpIDArg
}

type pinPayload struct {
	Owner string `json:"owner"`
	Item  string `json:"item"`
	Key   string `json:"key"`
	Unpin bool   `json:"unpin,omitempty"`
}

type pinResult struct {
	Key    string `json:"key"`
	Pinned bool   `json:"pinned"`
	Pins   int    `json:"pins"`
}

type pinOut struct {
	servers.WriteOut
	pinResult
}

func (s *srv) pinWorkItem(ctx context.Context, c authority.Caller, in pinIn) (pinOut, error) {
	if err := person(c, "a pin list"); err != nil {
		return pinOut{}, err
	}
	call, err := s.w.Begin(c, "pin_work_item", &in, false)
	if err != nil {
		return pinOut{}, err
	}
	pl := pinPayload{Owner: inboxOwner(c.Seat), Unpin: in.Unpin}
	wo, res, err := servers.Write[pinResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		it, err := readItem(r, in.Key)
		if err != nil {
			return servers.Intent{}, err
		}
		if it == nil {
			return servers.Intent{}, authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		pl.Item, pl.Key = it.ID, it.Key
		pinned, err := state.Exists(r, pinPrefix(pl.Owner)+it.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if pinned != pl.Unpin {
			// Already as asked: nothing to write.
			return servers.Intent{}, nil
		}
		if !pl.Unpin {
			m, err := readInboxMeta(r, pl.Owner)
			if err != nil {
				return servers.Intent{}, err
			}
			if err := inboxFull(m); err != nil {
				return servers.Intent{}, err
			}
		}
		return servers.Intent{Kind: kindPin, Payload: pl, What: "the pin on " + it.Key}, nil
	})
	if err != nil {
		return pinOut{}, err
	}
	out := pinOut{WriteOut: wo, pinResult: pinResult{Key: pl.Key, Pinned: !pl.Unpin}}
	if res != nil {
		out.pinResult = *res
	} else {
		_ = s.w.View(func(r pebble.Reader) error {
			m, err := readInboxMeta(r, pl.Owner)
			out.Pins = m.Pinned
			return err
		})
	}
	return out, nil
}

func applyPin(a *applier) (any, error) {
	var pl pinPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	m, err := readInboxMeta(a.R, pl.Owner)
	if err != nil {
		return nil, err
	}
	k := pinPrefix(pl.Owner) + pl.Item
	pinned, err := state.Exists(a.R, k)
	if err != nil {
		return nil, err
	}
	switch {
	case pl.Unpin && pinned:
		m.Pinned--
		err = a.B.Delete([]byte(k), nil)
	case !pl.Unpin && !pinned:
		if err := inboxFull(m); err != nil {
			return nil, err
		}
		m.Pinned++
		err = state.SetJSON(a.B, k, pin{Item: pl.Item, Key: pl.Key, At: a.At()})
	}
	if err != nil {
		return nil, err
	}
	if err := state.SetJSON(a.B, kInboxMeta+pl.Owner, m); err != nil {
		return nil, err
	}
	return pinResult{Key: pl.Key, Pinned: !pl.Unpin, Pins: m.Pinned}, nil
}
