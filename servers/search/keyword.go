package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/format/plain"
	simplefrag "github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/state"
)

// Internal values the bleve index keeps beside its documents, written in
// the same batch as the documents they describe.
var (
	keyThrough = []byte("crewlet/through") // the log position the index reflects
	keyMapping = []byte("crewlet/mapping") // mappingVersion the index was built with
)

// mappingVersion names the analysis below. Changing the mapping changes
// what an existing index means, so an index built under another version is
// rebuilt rather than searched.
const mappingVersion = "1"

// highlightStyle marks matched words with ** in a fragment: plain text a
// model and a person both read, unlike HTML tags.
const highlightStyle = "crewlet-marks"

// snippetBytes is about how long a highlighted fragment is.
const snippetBytes = 200

func init() {
	err := registry.RegisterHighlighter(highlightStyle, func(map[string]any, *registry.Cache) (highlight.Highlighter, error) {
		return simplehl.NewHighlighter(simplefrag.NewFragmenter(snippetBytes), plain.NewFragmentFormatter("**", "**"), " … "), nil
	})
	if err != nil {
		panic(err)
	}
}

// indexed is a document as the keyword index holds it. Title and body are
// stored, with term vectors, so a hit can be highlighted; scope is one
// exact term a query may be narrowed to.
type indexed struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Scope string `json:"scope"`
}

// newMapping is the analysis every field gets: English words, stemmed, so
// "indexing" finds "indexed"; the scope is kept whole.
func newMapping() mapping.IndexMapping {
	text := func() *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = en.AnalyzerName
		f.Store = true
		f.IncludeTermVectors = true
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	scope := bleve.NewKeywordFieldMapping()
	scope.Analyzer = keyword.Name
	scope.Store = false
	scope.IncludeInAll = false
	scope.DocValues = false

	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt("title", text())
	doc.AddFieldMappingsAt("body", text())
	doc.AddFieldMappingsAt("scope", scope)

	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = en.AnalyzerName
	m.IndexDynamic = false
	m.StoreDynamic = false
	m.DocValuesDynamic = false
	return m
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func readThrough(idx bleve.Index) (uint64, error) {
	v, err := idx.GetInternal(keyThrough)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("the index's position holds %d bytes, not 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// openKeyword opens the kind's bleve index, or builds it from the
// projection when it is missing, unreadable, built under another mapping,
// or ahead of the projection (the node's log was replaced). It answers the
// index and the log position it reflects.
func (ix *Index) openKeyword(ctx context.Context) (bleve.Index, uint64, error) {
	dir := ix.opts.Dir
	// A rebuild that did not finish leaves its directory behind; it holds
	// nothing the next rebuild needs.
	if err := os.RemoveAll(dir + ".rebuild"); err != nil {
		return nil, 0, err
	}
	idx, err := bleve.Open(dir)
	switch {
	case err == nil:
		through, terr := readThrough(idx)
		ver, verr := idx.GetInternal(keyMapping)
		switch {
		case terr != nil || verr != nil:
			ix.log.Warn("search: the keyword index's bookkeeping is unreadable; rebuilding it from the projection", "kind", ix.opts.Kind, "err", errors.Join(terr, verr))
		case string(ver) != mappingVersion:
			ix.log.Info("search: the keyword index was built with another analysis; rebuilding it", "kind", ix.opts.Kind, "built", string(ver), "now", mappingVersion)
		case through > ix.opts.Node.Position():
			ix.log.Warn("search: the keyword index is ahead of the projection (a replaced log?); rebuilding it", "kind", ix.opts.Kind, "index", through, "projection", ix.opts.Node.Position())
		default:
			return idx, through, nil
		}
		_ = idx.Close()
	case errors.Is(err, bleve.ErrorIndexPathDoesNotExist):
		ix.log.Info("search: building the keyword index from the projection", "kind", ix.opts.Kind, "dir", dir)
	default:
		ix.log.Warn("search: the keyword index cannot be opened; rebuilding it from the projection", "kind", ix.opts.Kind, "dir", dir, "err", err)
	}
	return ix.rebuildKeyword(ctx)
}

// rebuildBatch is how many documents a rebuild writes per bleve batch.
const rebuildBatch = 1000

// rebuildKeyword indexes every document the projection holds into a fresh
// directory and only then puts it in place of the old one, so a crash
// during a rebuild leaves either the old index or none, never a partial
// one that claims a position.
func (ix *Index) rebuildKeyword(ctx context.Context) (bleve.Index, uint64, error) {
	dir, tmp := ix.opts.Dir, ix.opts.Dir+".rebuild"
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, 0, err
	}
	idx, err := bleve.New(tmp, newMapping())
	if err != nil {
		return nil, 0, fmt.Errorf("search: create the keyword index: %w", err)
	}
	var through uint64
	docs := 0
	err = ix.opts.Node.View(func(r pebble.Reader) error {
		var err error
		if through, err = state.PositionOf(r); err != nil {
			return err
		}
		b := idx.NewBatch()
		err = ix.opts.IDs(r, func(id string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, ok, err := ix.opts.Source(r, id)
			if err != nil || !ok || d.Hidden {
				return err
			}
			if err := b.Index(id, toIndexed(d)); err != nil {
				return err
			}
			docs++
			if b.Size() >= rebuildBatch {
				if err := idx.Batch(b); err != nil {
					return err
				}
				b.Reset()
			}
			return nil
		})
		if err != nil {
			return err
		}
		b.SetInternal(keyMapping, []byte(mappingVersion))
		b.SetInternal(keyThrough, u64(through))
		return idx.Batch(b)
	})
	if cerr := idx.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, 0, fmt.Errorf("search: rebuild the keyword index: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, 0, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, 0, err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return nil, 0, err
	}
	if idx, err = bleve.Open(dir); err != nil {
		return nil, 0, fmt.Errorf("search: open the rebuilt keyword index: %w", err)
	}
	ix.rebuilt = true
	ix.log.Info("search: keyword index built", "kind", ix.opts.Kind, "documents", docs, "position", through)
	return idx, through, nil
}

// syncDir makes a rename inside dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func toIndexed(d Doc) indexed { return indexed{Title: d.Title, Body: d.Body, Scope: d.Scope} }

// keywordQuery is the query a text becomes: its words matched in title and
// body (a title counts more), the words next to each other ranked above
// the words apart, and near spellings found at a lower rank. A part in
// double quotes must appear as that phrase.
func keywordQuery(text, scope string) query.Query {
	loose, phrases := splitPhrases(text)
	var should []query.Query
	field := func(f string, boost float64, q interface {
		query.Query
		SetField(string)
		SetBoost(float64)
	}) query.Query {
		q.SetField(f)
		q.SetBoost(boost)
		return q
	}
	if strings.TrimSpace(loose) != "" {
		for _, f := range []struct {
			name  string
			boost float64
		}{{"title", 2}, {"body", 1}} {
			should = append(should, field(f.name, f.boost, bleve.NewMatchQuery(loose)))
			should = append(should, field(f.name, 2*f.boost, bleve.NewMatchPhraseQuery(loose)))
			fuzzy := bleve.NewMatchQuery(loose)
			fuzzy.SetAutoFuzziness(true)
			should = append(should, field(f.name, f.boost/4, fuzzy))
		}
	}
	var must []query.Query
	for _, p := range phrases {
		must = append(must, bleve.NewDisjunctionQuery(
			field("title", 4, bleve.NewMatchPhraseQuery(p)),
			field("body", 2, bleve.NewMatchPhraseQuery(p))))
	}
	var q query.Query
	switch {
	case len(should) > 0 && len(must) > 0:
		b := bleve.NewBooleanQuery()
		b.AddMust(must...)
		b.AddShould(should...)
		q = b
	case len(must) > 0:
		q = bleve.NewConjunctionQuery(must...)
	default:
		q = bleve.NewDisjunctionQuery(should...)
	}
	if scope == "" {
		return q
	}
	t := bleve.NewTermQuery(scope)
	t.SetField("scope")
	return bleve.NewConjunctionQuery(q, t)
}

// splitPhrases takes the parts of text in double quotes out as phrases; an
// unbalanced quote is read as a plain character.
func splitPhrases(text string) (loose string, phrases []string) {
	parts := strings.Split(text, `"`)
	if len(parts)%2 == 0 {
		return text, nil
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && strings.TrimSpace(p) != "" {
			phrases = append(phrases, p)
			continue
		}
		b.WriteString(p)
		b.WriteByte(' ')
	}
	return b.String(), phrases
}

// keywordHit is one document the keyword index ranked.
type keywordHit struct {
	id      string
	score   float64
	snippet string
}

// searchKeyword ranks the kind's documents by keyword, best first.
func (ix *Index) searchKeyword(ctx context.Context, text, scope string, size int) ([]keywordHit, error) {
	req := bleve.NewSearchRequestOptions(keywordQuery(text, scope), size, 0, false)
	req.Highlight = bleve.NewHighlightWithStyle(highlightStyle)
	req.Highlight.Fields = []string{"body", "title"}
	res, err := ix.bleve.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]keywordHit, 0, len(res.Hits))
	for _, h := range res.Hits {
		// The fragment that shows a matched word, the body's first.
		snip := ""
		for _, f := range []string{"body", "title"} {
			if fr := h.Fragments[f]; len(fr) > 0 && (snip == "" || strings.Contains(fr[0], "**") && !strings.Contains(snip, "**")) {
				snip = fr[0]
			}
		}
		out = append(out, keywordHit{id: h.ID, score: h.Score, snippet: snip})
	}
	return out, nil
}
