package knowledge

import (
	"context"
	"log/slog"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// Pages are found through the hub's one search (package search, KB-3): the
// projectors mark a page whenever it is written, and the index reads it
// back from the projection. A draft or a page in the trash is hidden from
// every search until it is published or restored.

// SearchKind is the kind pages are searched as.
const SearchKind = "knowledge.pages"

// OpenSearch opens the knowledge base's search index over node, its
// keyword index under searchDir/SearchKind; Close it before the node.
func OpenSearch(ctx context.Context, node *state.Node, searchDir string, emb search.Embedder, log *slog.Logger) (*search.Index, error) {
	pages := search.Options{Kind: SearchKind, Source: pageDoc, IDs: pageIDs, Noun: "page"}
	return search.Open(ctx, pages.Over(node, searchDir, emb, log))
}

// pageDoc is a page as the search index reads it.
func pageDoc(r pebble.Reader, id string) (search.Doc, bool, error) {
	p, err := readPage(r, id)
	if err != nil || p == nil {
		return search.Doc{}, false, err
	}
	return search.Doc{ID: p.ID, Title: p.Title, Body: p.Body, Scope: p.Container, Hidden: p.Status == draft || p.Trashed}, true, nil
}

// pageIDs lists every page's id, for a rebuild of the index.
func pageIDs(r pebble.Reader, fn func(id string) error) error {
	list, err := ids(r, kPage)
	if err != nil {
		return err
	}
	for _, id := range list {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

// ---- search_knowledge ----

type searchIn struct {
	Query     string `json:"query" jsonschema:"what the page says, in words; a part in double quotes must appear as that phrase; at most 400 bytes"`
	Mode      string `json:"mode,omitempty" jsonschema:"hybrid (default), keyword or semantic"`
	Container string `json:"container,omitempty" jsonschema:"only this container's pages (a unit's space)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 50; default 10"`
}

type searchHit struct {
	ID        string  `json:"id"`
	Title     string  `json:"title"`
	Container string  `json:"container"`
	Score     float64 `json:"score"`
	// Snippet is where the page matched, matched words between ** marks,
	// fenced as its writers' text.
	Snippet string `json:"snippet,omitempty"`
}

type searchOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Mode       string             `json:"mode"`
	Degraded   string             `json:"degraded,omitempty"`
	Note       string             `json:"note,omitempty"`
	Pages      []searchHit        `json:"pages"`
}

func (s *srv) searchKnowledge(ctx context.Context, c authority.Caller, in searchIn) (searchOut, error) {
	limit, err := servers.PageLimit(in.Limit, 10, 50)
	if err != nil {
		return searchOut{}, err
	}
	scope := ""
	if strings.TrimSpace(in.Container) != "" {
		var err error
		if scope, err = s.resolveContainer(c, in.Container); err != nil {
			return searchOut{}, err
		}
	}
	if s.d.Search == nil {
		return searchOut{}, authority.Refuse(authority.Unavailable, "The knowledge base's search index is not open on this hub node, so nothing was searched. list_pages still browses the pages; search again once the node is back.")
	}
	res, err := s.d.Search.Search(ctx, search.Query{Text: in.Query, Mode: in.Mode, Scope: scope, Limit: limit})
	if err != nil {
		return searchOut{}, err
	}
	out := searchOut{Mode: res.Mode, Degraded: res.Degraded, Note: res.Note, Pages: []searchHit{}}
	e := envelope()
	err = s.w.View(func(r pebble.Reader) error {
		for _, h := range res.Hits {
			p, err := readPage(r, h.ID)
			if err != nil {
				return err
			}
			// Gone, hidden or reserved since the index looked: never
			// answered.
			if p == nil || p.Status == draft || p.Trashed || isReserved(p.Container) {
				continue
			}
			out.Pages = append(out.Pages, searchHit{ID: p.ID, Title: e.Fence(p.Title, p.WrittenBy), Container: p.Container,
				Score: math.Round(h.Score*1e4) / 1e4, Snippet: e.Fence(h.Snippet, p.WrittenBy)})
		}
		return nil
	})
	out.Provenance = e.Provenance()
	return out, err
}
