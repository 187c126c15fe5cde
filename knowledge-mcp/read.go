package knowledge

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// historyShown is how many of a page's newest history rows get_page
// answers; it says how many older ones it left out.
const historyShown = 100

// ---- get_page ----

type getIn struct {
	ID string `json:"id" jsonschema:"the page's id (pg_...)"`
}

type pageRef struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status,omitempty"`
}

type commentOut struct {
	ID     int       `json:"id"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Body   string    `json:"body"`
	Edited bool      `json:"edited,omitempty"`
}

type pageView struct {
	ID             string       `json:"id"`
	Container      string       `json:"container"`
	Title          string       `json:"title"`
	Status         string       `json:"status"`
	Folder         bool         `json:"folder,omitempty"`
	Body           string       `json:"body,omitempty"`
	Breadcrumb     []pageRef    `json:"breadcrumb,omitempty"`
	Children       []pageRef    `json:"children,omitempty"`
	Links          []pageRef    `json:"links,omitempty"`
	LinkedFrom     []pageRef    `json:"linked_from,omitempty"`
	Comments       []commentOut `json:"comments,omitempty"`
	History        []historyRow `json:"history,omitempty"`
	HistoryOmitted int          `json:"history_omitted,omitempty"`
	Watchers       []string     `json:"watchers,omitempty"`
	Version        int          `json:"version"`
	CreatedBy      string       `json:"created_by"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`
}

type getOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Page       pageView           `json:"page"`
}

func (s *srv) getPage(_ context.Context, c authority.Caller, in getIn) (getOut, error) {
	var out getOut
	err := s.w.View(func(r pebble.Reader) error {
		p, err := s.pageFor(r, c, in.ID)
		if err != nil {
			return err
		}
		if p.Trashed {
			return inTrash(p)
		}
		e := envelope()
		v := pageView{ID: p.ID, Container: p.Container, Title: e.Fence(p.Title, p.WrittenBy), Status: p.Status, Folder: p.Body == "",
			Body: e.Fence(p.Body, p.WrittenBy), Watchers: p.Watchers, Version: p.Version,
			CreatedBy: p.CreatedBy.Seat, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
		v.History, v.HistoryOmitted = p.History, 0
		if len(p.History) > historyShown {
			v.HistoryOmitted = len(p.History) - historyShown
			v.History = p.History[v.HistoryOmitted:]
		}
		for _, c := range p.Comments {
			v.Comments = append(v.Comments, commentOut{ID: c.ID, By: c.By.Seat, At: c.At, Body: e.Fence(c.Body, []servers.Author{c.By}), Edited: c.Edited})
		}
		// Where it sits: its ancestors from the container's top.
		for up, depth := p.Parent, 0; up != "" && depth < maxDepth; depth++ {
			a, err := readPage(r, up)
			if err != nil || a == nil {
				break
			}
			v.Breadcrumb = append([]pageRef{{ID: a.ID, Title: e.Fence(a.Title, a.WrittenBy)}}, v.Breadcrumb...)
			up = a.Parent
		}
		if v.Children, err = refs(r, e, kChild+p.Container+"/"+p.ID+"/"); err != nil {
			return err
		}
		if v.LinkedFrom, err = refs(r, e, kLinkedFrom+p.ID+"/"); err != nil {
			return err
		}
		for _, id := range p.Links {
			ref := pageRef{ID: id, Status: "missing"}
			if l, err := readPage(r, id); err != nil {
				return err
			} else if l != nil {
				ref = pageRef{ID: l.ID, Title: e.Fence(l.Title, l.WrittenBy), Status: l.Status}
				if l.Trashed {
					ref.Status = "trashed"
				}
			}
			v.Links = append(v.Links, ref)
		}
		out = getOut{Provenance: e.Provenance(), Page: v}
		return nil
	})
	return out, err
}

// refs reads the pages whose ids end the keys under prefix, trashed pages
// left out, each title fenced as its writers' in e (WR-10).
func refs(r pebble.Reader, e *servers.Envelope, prefix string) ([]pageRef, error) {
	list, err := ids(r, prefix)
	if err != nil {
		return nil, err
	}
	var out []pageRef
	for _, id := range list {
		p, err := readPage(r, id)
		if err != nil {
			return nil, err
		}
		if p != nil && !p.Trashed {
			out = append(out, pageRef{ID: p.ID, Title: e.Fence(p.Title, p.WrittenBy), Status: p.Status})
		}
	}
	return out, nil
}

// ---- list_pages ----

type listIn struct {
	Container string `json:"container,omitempty" jsonschema:"a unit's space; defaults to your own unit's"`
	Parent    string `json:"parent,omitempty" jsonschema:"only the pages directly under this page; - for the container's top"`
	Title     string `json:"title,omitempty" jsonschema:"only pages whose title contains these words (any case)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 200; default 50"`
	Cursor    string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page"`
}

type pageSummary struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	Parent    string    `json:"parent,omitempty"`
	Folder    bool      `json:"folder,omitempty"`
	Comments  int       `json:"comments,omitempty"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

type listOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Container  string             `json:"container"`
	Pages      []pageSummary      `json:"pages"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

func (s *srv) listPages(_ context.Context, c authority.Caller, in listIn) (listOut, error) {
	limit, err := servers.PageLimit(in.Limit, 50, 200)
	if err != nil {
		return listOut{}, err
	}
	container, err := s.resolveContainer(c, in.Container)
	if err != nil {
		return listOut{}, err
	}
	out := listOut{Container: container, Pages: []pageSummary{}}
	e := envelope()
	err = s.w.View(func(r pebble.Reader) error {
		parent := in.Parent
		if parent != "" && parent != "-" {
			p, err := readPage(r, parent)
			if err != nil {
				return err
			}
			if p == nil || p.Container != container {
				return authority.Refuse(authority.Invalid, "parent %s names no page of %s.", parent, container)
			}
		}
		// Walk the container's title addresses: title order, and a
		// cursor that is the last address answered.
		prefix := kTitle + container + "/"
		lower := []byte(prefix)
		if in.Cursor != "" {
			cur, err := base64.RawURLEncoding.DecodeString(in.Cursor)
			if err != nil || !strings.HasPrefix(string(cur), prefix) {
				return authority.Refuse(authority.Invalid, "cursor is not a next_cursor list_pages answered for %s.", container)
			}
			lower = append(cur, 0)
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: state.Upper(prefix)})
		if err != nil {
			return err
		}
		defer it.Close()
		words := strings.ToLower(strings.TrimSpace(in.Title))
		var last string
		for it.First(); it.Valid(); it.Next() {
			var id string
			if found, err := state.GetJSON(r, string(it.Key()), &id); err != nil || !found {
				return err
			}
			p, err := readPage(r, id)
			if err != nil {
				return err
			}
			switch {
			case p == nil, p.Trashed:
				continue
			case parent == "-" && p.Parent != "", parent != "" && parent != "-" && p.Parent != parent:
				continue
			case words != "" && !strings.Contains(strings.ToLower(p.Title), words):
				continue
			}
			if len(out.Pages) == limit {
				out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(last))
				break
			}
			out.Pages = append(out.Pages, pageSummary{ID: p.ID, Title: e.Fence(p.Title, p.WrittenBy), Status: p.Status, Parent: p.Parent, Folder: p.Body == "",
				Comments: len(p.Comments), Version: p.Version, UpdatedAt: p.UpdatedAt})
			last = string(it.Key())
		}
		return nil
	})
	out.Provenance = e.Provenance()
	return out, err
}
