package knowledge

import (
	"context"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// The trash (ART-4). What is in it, and taking a page out, are tools on
// the operator surface only (OPS-3); putting a page in is the dashboard's
// (Store.Trash), as the seat tools and the operator catalogue's count
// leave no tool for it. A page in the trash is listed by no container,
// found by no search, read by nobody and takes no edit until it is
// restored. Both are a person's decisions about a space: its unit's
// lead's, an administrator's, and the page's maker's to put in, or
// whoever put it there's to take out.

// maxTrashListed bounds one answer of list_trash; more says how many it
// left out.
const maxTrashListed = 200

const trashedChange = "put in the trash"

// ---- list_trash ----

type listTrashIn struct {
	Container string `json:"container,omitempty" jsonschema:"only this container's pages (a unit's space)"`
}

// TrashRow is one page in a person's trash.
type TrashRow struct {
	ID        string `json:"id"`
	Container string `json:"container"`
	Title     string `json:"title"`
	TrashedBy string `json:"trashed_by,omitempty"`
	TrashedAt string `json:"trashed_at,omitempty"`
	Version   int    `json:"version"`
	// writers wrote the title, for the fence list_trash answers it in.
	writers []servers.Author
}

type listTrashOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Pages      []TrashRow         `json:"pages"`
	More       int                `json:"more,omitempty"`
}

// listTrash answers a person's trash to a model, each title fenced as its
// writers' (WR-10); the dashboard reads the same rows unfenced (TrashOf),
// since it shows them as text, never as something to obey.
func (s *srv) listTrash(ctx context.Context, c authority.Caller, in listTrashIn) (listTrashOut, error) {
	out, err := s.trashRows(ctx, c, in)
	if err != nil {
		return out, err
	}
	e := envelope()
	for i := range out.Pages {
		out.Pages[i].Title = e.Fence(out.Pages[i].Title, out.Pages[i].writers)
	}
	out.Provenance = e.Provenance()
	return out, nil
}

// trashRows is the pages in c's trash, titles as written.
func (s *srv) trashRows(_ context.Context, c authority.Caller, in listTrashIn) (listTrashOut, error) {
	if c.Kind == authority.KindAgent {
		return listTrashOut{}, authority.Refuse(authority.Forbidden, "The trash is for people on the operator surface, not seats.")
	}
	container := ""
	if in.Container != "" {
		var err error
		if container, err = s.resolveContainer(c, in.Container); err != nil {
			return listTrashOut{}, err
		}
	}
	out := listTrashOut{Pages: []TrashRow{}}
	err := s.w.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kPage), UpperBound: state.Upper(kPage)})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			var p page
			if err := state.DecodeJSON(it.Key(), it.Value(), &p); err != nil {
				return err
			}
			if !p.Trashed || (container != "" && p.Container != container) || isReserved(p.Container) {
				continue
			}
			// A person's trash: what they may take out.
			if s.mayRestore(c, &p) != nil {
				continue
			}
			if len(out.Pages) == maxTrashListed {
				out.More++
				continue
			}
			row := TrashRow{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version, writers: p.WrittenBy}
			if h, ok := trashedRow(&p); ok {
				row.TrashedBy, row.TrashedAt = h.By, h.At.Format("2006-01-02T15:04:05.000Z07:00")
			}
			out.Pages = append(out.Pages, row)
		}
		return nil
	})
	return out, err
}

// trashedRow is the history row that put p in the trash, the newest one.
func trashedRow(p *page) (historyRow, bool) {
	for i := len(p.History) - 1; i >= 0; i-- {
		if p.History[i].Change == trashedChange {
			return p.History[i], true
		}
	}
	return historyRow{}, false
}

// ---- restore_from_trash ----

type restoreIn struct {
	ID string `json:"id" jsonschema:"the page to take out of the trash (list_trash shows them)"`
	servers.OpIDArg
}

type restoreOut struct {
	servers.WriteOut
	ID        string `json:"id"`
	Container string `json:"container,omitempty"`
	Title     string `json:"title,omitempty"`
	Version   int    `json:"version,omitempty"`
}

func (s *srv) restoreFromTrash(ctx context.Context, c authority.Caller, in restoreIn) (restoreOut, error) {
	if c.Kind == authority.KindAgent {
		return restoreOut{}, authority.Refuse(authority.Forbidden, "The trash is for people on the operator surface, not seats.")
	}
	call, err := s.w.Begin(c, "restore_from_trash", &in, false)
	if err != nil {
		return restoreOut{}, err
	}
	id := strings.TrimSpace(in.ID)
	wo, res, err := servers.Write[pageResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := readPage(r, id)
		if err != nil {
			return servers.Intent{}, err
		}
		switch {
		case p == nil || isReserved(p.Container):
			return servers.Intent{}, authority.Refuse(authority.NotFound, "No page has the id %q.", in.ID)
		case !p.Trashed:
			return servers.Intent{}, authority.Refuse(authority.Invalid, "%s is not in the trash; there is nothing to restore.", p.ID)
		}
		if err := s.mayRestore(c, p); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindTrash, Payload: trashPayload{ID: p.ID, Restore: true}, What: "the restore of " + p.ID}, nil
	})
	if err != nil {
		return restoreOut{}, err
	}
	out := restoreOut{WriteOut: wo, ID: id}
	if res != nil {
		out.ID, out.Container, out.Title, out.Version = res.ID, res.Container, res.Title, res.Version
	}
	return out, nil
}

// mayRestore refuses a restore by anybody but the lead of the page's
// space, an administrator, or whoever put the page in the trash.
func (s *srv) mayRestore(c authority.Caller, p *page) error {
	if s.leadsOrAdmin(c, p) {
		return nil
	}
	if h, ok := trashedRow(p); ok && strings.EqualFold(h.By, c.Seat) {
		return nil
	}
	lead := s.leadOf(p)
	return authority.Refuse(authority.Forbidden, "Restoring %s is for the lead of %s (%s), an administrator, or whoever put it in the trash; ask one of them.", p.ID, p.Container, orNobody(lead)).
		WithData("lead", lead)
}

// mayTrash refuses putting a page in the trash by anybody but the lead of
// its space, an administrator, or the person who made it: the trash hides
// a page from everybody who relies on it, which is not a colleague's call.
func (s *srv) mayTrash(c authority.Caller, p *page) error {
	if s.leadsOrAdmin(c, p) || (c.Kind == authority.KindHuman && strings.EqualFold(p.CreatedBy.Seat, c.Seat)) {
		return nil
	}
	lead := s.leadOf(p)
	return authority.Refuse(authority.Forbidden, "Putting %s in the trash is for the lead of %s (%s), an administrator, or @%s, who made it; ask one of them.", p.ID, p.Container, orNobody(lead), p.CreatedBy.Seat).
		WithData("lead", lead)
}

// leadsOrAdmin reports whether c is an administrator or, a person, leads
// the unit whose space p is in.
func (s *srv) leadsOrAdmin(c authority.Caller, p *page) bool {
	if authority.IsAdmin(c, s.dir()) {
		return true
	}
	lead := s.leadOf(p)
	return c.Kind == authority.KindHuman && lead != "" && strings.EqualFold(lead, c.Seat)
}

// leadOf is the lead of the unit whose space p is in; "" when none is.
func (s *srv) leadOf(p *page) string {
	lead := ""
	for _, u := range s.dir().Units() {
		if strings.EqualFold(u.Space, p.Container) {
			lead = u.Lead
		}
	}
	return lead
}

func orNobody(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}

// ---- a person putting a page in the trash, from the dashboard ----

// Store is the knowledge base's entry beside its tools: the dashboard's
// trash of pages (ART-4).
type Store struct{ s *srv }

// NewStore is the store over the same node and directory the tools use.
func NewStore(d Deps) *Store { return &Store{s: newSrv(d)} }

type trashIn struct {
	ID string `json:"id"`
	servers.OpIDArg
}

// Trashed is the answer to putting a page in the trash: the write's
// outcome and the page as it now is.
type Trashed struct {
	servers.WriteOut
	ID        string `json:"id"`
	Container string `json:"container,omitempty"`
	Title     string `json:"title,omitempty"`
	Version   int    `json:"version,omitempty"`
}

// Trash puts a page in the trash for a person: the lead of its space, an
// administrator, or whoever made it. A page already there is answered
// unchanged; restore_from_trash takes it out.
func (st *Store) Trash(ctx context.Context, c authority.Caller, id string) (Trashed, error) {
	s := st.s
	if c.Kind == authority.KindAgent {
		return Trashed{}, authority.Refuse(authority.Forbidden, "The trash is for people, in the dashboard, not seats.")
	}
	if s.w.Node() == nil {
		return Trashed{}, authority.Refuse(authority.Unavailable, "The knowledge base has no state node here.")
	}
	in := trashIn{ID: strings.TrimSpace(id)}
	call, err := s.w.Begin(c, "trash_page", &in, false)
	if err != nil {
		return Trashed{}, err
	}
	wo, res, err := servers.Write[pageResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := s.pageFor(r, c, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := s.mayTrash(c, p); err != nil {
			return servers.Intent{}, err
		}
		if p.Trashed {
			return servers.Intent{}, nil // nothing to change
		}
		return servers.Intent{Kind: kindTrash, Payload: trashPayload{ID: p.ID}, What: "putting " + p.ID + " in the trash"}, nil
	})
	if err != nil {
		return Trashed{}, err
	}
	out := Trashed{WriteOut: wo, ID: in.ID}
	if res != nil {
		out.ID, out.Container, out.Title, out.Version = res.ID, res.Container, res.Title, res.Version
	}
	return out, nil
}

// TrashOf is c's trash of pages: those c may take out, as list_trash
// answers them, titles unfenced for the dashboard.
func (st *Store) TrashOf(ctx context.Context, c authority.Caller) ([]TrashRow, int, error) {
	out, err := st.s.trashRows(ctx, c, listTrashIn{})
	return out.Pages, out.More, err
}
