package tracker

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

// ---- search_work_items ----

// The tracker's items are found through the hub's one search (package
// search): its projectors mark an item whenever what a search reads of it
// changes (title, description, project, key), and the index reads the item
// back from the projection by its id, which a move does not change.

// SearchKind is the kind the tracker's items are searched as.
const SearchKind = "tracker.items"

// OpenSearch opens the tracker's search index over node, its keyword index
// under searchDir/SearchKind; Close it before the node.
func OpenSearch(ctx context.Context, node *state.Node, searchDir string, emb search.Embedder, log *slog.Logger) (*search.Index, error) {
	items := search.Options{Kind: SearchKind, Source: itemDoc, IDs: itemIDs, Noun: "work item"}
	return search.Open(ctx, items.Over(node, searchDir, emb, log))
}

// searchable is the part of an item a search reads.
type searchable struct {
	Key         string           `json:"key"`
	Project     string           `json:"project"`
	Title       string           `json:"title"`
	TitledBy    []servers.Author `json:"titled_by,omitempty"`
	Description string           `json:"description,omitempty"`
	DescribedBy []servers.Author `json:"described_by,omitempty"`
	CreatedBy   servers.Author   `json:"created_by"`
}

func readSearchable(r pebble.Reader, id string) (*searchable, error) {
	var key string
	found, err := state.GetJSON(r, kID+id, &key)
	if err != nil || !found {
		return nil, err
	}
	var it searchable
	found, err = state.GetJSON(r, kItem+key, &it)
	if err != nil || !found {
		return nil, err
	}
	return &it, nil
}

// itemDoc is an item as the search index reads it, by item id.
func itemDoc(r pebble.Reader, id string) (search.Doc, bool, error) {
	it, err := readSearchable(r, id)
	if err != nil || it == nil {
		return search.Doc{}, false, err
	}
	return search.Doc{ID: id, Title: it.Title, Body: it.Description, Scope: it.Project}, true, nil
}

// itemIDs lists every item's id, for a rebuild of the index.
func itemIDs(r pebble.Reader, fn func(id string) error) error {
	iter, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kID), UpperBound: state.Upper(kID)})
	if err != nil {
		return err
	}
	for iter.First(); iter.Valid(); iter.Next() {
		if err := fn(strings.TrimPrefix(string(iter.Key()), kID)); err != nil {
			_ = iter.Close()
			return err
		}
	}
	return iter.Close()
}

// touchSearch marks the item for the search index when what a search reads
// of it changed; old is nil for a new item.
func (a *applier) touchSearch(old, it *item) error {
	if old != nil && old.Title == it.Title && old.Description == it.Description && old.Project == it.Project && old.Key == it.Key {
		return nil
	}
	return search.Touch(a.B, a.Pos, SearchKind, it.ID)
}

type searchIn struct {
	Query   string `json:"query" jsonschema:"what the item says, in words; a part in double quotes must appear as that phrase; at most 400 bytes"`
	Mode    string `json:"mode,omitempty" jsonschema:"hybrid (default), keyword or semantic"`
	Project string `json:"project,omitempty" jsonschema:"only this project's items"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 50; default 10"`
}

type searchHit struct {
	summary
	Score float64 `json:"score"`
	// Snippet is where the item matched, matched words between ** marks,
	// fenced as its writers' text.
	Snippet string `json:"snippet,omitempty"`
}

type searchOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Mode       string             `json:"mode"`
	Degraded   string             `json:"degraded,omitempty"`
	Note       string             `json:"note,omitempty"`
	Items      []searchHit        `json:"items"`
}

func (s *srv) searchWorkItems(ctx context.Context, _ authority.Caller, in searchIn) (searchOut, error) {
	limit, err := servers.PageLimit(in.Limit, 10, 50)
	if err != nil {
		return searchOut{}, err
	}
	if s.d.Search == nil {
		return searchOut{}, authority.Refuse(authority.Unavailable, "The tracker's search index is not open on this hub node, so nothing was searched. list_work_items still reads the board; search again once the node is back.")
	}
	res, err := s.d.Search.Search(ctx, search.Query{Text: in.Query, Mode: in.Mode, Scope: strings.ToUpper(strings.TrimSpace(in.Project)), Limit: limit})
	if err != nil {
		return searchOut{}, err
	}
	out := searchOut{Mode: res.Mode, Degraded: res.Degraded, Note: res.Note, Items: []searchHit{}}
	e := envelope()
	err = s.w.View(func(r pebble.Reader) error {
		for _, h := range res.Hits {
			it, err := readSearchable(r, h.ID)
			if err != nil {
				return err
			}
			if it == nil {
				continue // gone since the search looked
			}
			var row summaryRow
			found, err := state.GetJSON(r, kSummary+it.Key, &row)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			sm, err := row.answer(r, e)
			if err != nil {
				return err
			}
			writers := it.TitledBy
			if len(writers) == 0 {
				writers = []servers.Author{it.CreatedBy}
			}
			for _, a := range it.DescribedBy {
				if !containsAuthor(writers, a) {
					writers = append(writers, a)
				}
			}
			out.Items = append(out.Items, searchHit{summary: sm, Score: math.Round(h.Score*1e4) / 1e4, Snippet: e.Fence(h.Snippet, writers)})
		}
		return nil
	})
	out.Provenance = e.Provenance()
	return out, err
}

func containsAuthor(as []servers.Author, a servers.Author) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}
