package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/registry"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/format/plain"
	simplefrag "github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/atomicfile"
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
	idx, err := openBleve(dir)
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

// openBleve opens an index whose batches return once they are searchable
// rather than once they are on disk: bleve's persister then writes what
// several batches introduced as one segment, which its merger rewrites far
// less often than a segment per batch (measured: the merger was a fifth of
// the CPU a stream of tracker creates cost with a synced segment each). What is on disk is still always a
// whole snapshot — documents and the position they reflect together — and
// the indexer learns when a batch reached it from the batch's persisted
// callback; only then are its marks pruned.
func openBleve(dir string) (bleve.Index, error) {
	return bleve.OpenUsing(dir, map[string]any{
		"unsafe_batch":           true,
		"scorchPersisterOptions": map[string]any{"PersisterNapTimeMSec": int(persisterNap / time.Millisecond)},
	})
}

// persisterNap is how long bleve's persister lets searchable batches
// gather before it writes them: merged in memory first, they reach the
// disk as fewer segments for its merger to rewrite. A crash loses nothing
// by it: what was not on disk is indexed again from its marks.
const persisterNap = 500 * time.Millisecond

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
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, 0, err
	}
	if idx, err = openBleve(dir); err != nil {
		return nil, 0, fmt.Errorf("search: open the rebuilt keyword index: %w", err)
	}
	ix.rebuilt = true
	ix.log.Info("search: keyword index built", "kind", ix.opts.Kind, "documents", docs, "position", through)
	return idx, through, nil
}

func toIndexed(d Doc) indexed { return indexed{Title: d.Title, Body: d.Body, Scope: d.Scope} }

// fieldQuery is a query on one field with a boost.
type fieldQuery interface {
	query.Query
	SetField(string)
	SetBoost(float64)
}

func on(f string, boost float64, q fieldQuery) query.Query {
	q.SetField(f)
	q.SetBoost(boost)
	return q
}

// fields are the fields a text is matched in: a title counts more, being
// what a document says it is about.
var fields = []struct {
	name  string
	boost float64
}{{"title", 2}, {"body", 1}}

// exactQuery is the query a text becomes: its words matched in title and
// body. A part in double quotes must appear as that phrase. Words next to
// each other are not asked of the index for the rest of the text (a phrase
// query reads every matching document's positions: 300 ms over 100,000
// documents sharing common words); the ranked hits are re-ranked instead
// (adjacentBoost).
// With all, a field must hold every word.
func exactQuery(text, scope string, all bool) query.Query {
	loose, phrases := splitPhrases(text)
	var should []query.Query
	if strings.TrimSpace(loose) != "" {
		for _, f := range fields {
			m := bleve.NewMatchQuery(loose)
			if all {
				m.SetOperator(query.MatchQueryOperatorAnd)
			}
			should = append(should, on(f.name, f.boost, m))
		}
	}
	return combine(should, phrases, scope)
}

// adjacent finds two highlighted words with nothing but a space or a
// punctuation mark between them: words of the query next to each other in
// the document.
var adjacent = regexp.MustCompile(`\*\*[^*]+\*\*[\s\p{P}]{1,3}\*\*[^*]+\*\*`)

// adjacentBoost multiplies the score of a hit whose highlighted fragment
// shows query words next to each other, so the words together rank above
// the words apart.
const adjacentBoost = 1.5

// fuzzyQuery finds near spellings of the text's words (a typo, another
// spelling): only words of letters long enough to tell apart, because near
// spellings of a number or a code ("term0042", "v1.2") are other numbers,
// and there are many of them.
func fuzzyQuery(text, scope string) (query.Query, bool) {
	loose, phrases := splitPhrases(text)
	var words []string
	for _, w := range strings.Fields(loose) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) })
		if utf8.RuneCountInString(w) >= 4 && !strings.ContainsFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return nil, false
	}
	var should []query.Query
	for _, f := range fields {
		m := bleve.NewMatchQuery(strings.Join(words, " "))
		m.SetAutoFuzziness(true)
		should = append(should, on(f.name, f.boost, m))
	}
	return combine(should, phrases, scope), true
}

// combine joins loose matches (any may match), quoted phrases (each must)
// and a scope (must). Beside phrases the loose words only rank; with no
// phrase one of them at least must match: a boolean query's should clauses
// are optional beside a must, so a scope alone would answer every document
// in it.
func combine(should []query.Query, phrases []string, scope string) query.Query {
	var must []query.Query
	for _, p := range phrases {
		must = append(must, bleve.NewDisjunctionQuery(
			on("title", 4, bleve.NewMatchPhraseQuery(p)),
			on("body", 2, bleve.NewMatchPhraseQuery(p))))
	}
	if scope != "" {
		t := bleve.NewTermQuery(scope)
		t.SetField("scope")
		must = append(must, t)
	}
	switch {
	case len(should) == 0:
		return bleve.NewConjunctionQuery(must...)
	case len(must) == 0:
		return bleve.NewDisjunctionQuery(should...)
	}
	b := bleve.NewBooleanQuery()
	b.AddMust(must...)
	if len(phrases) == 0 {
		b.AddMust(bleve.NewDisjunctionQuery(should...))
	} else {
		b.AddShould(should...)
	}
	return b
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
	id        string
	score     float64
	snippet   string
	fragments string // every highlighted fragment, for re-ranking
}

// searchKeyword ranks up to size of the kind's documents by keyword, best
// first, in stages that each run only while the ones before found fewer
// than need documents, each stage's hits ranked below the last's:
//
//   - every word of the query in one field: the documents a person means
//     first, and cheap to find, since the index walks the rarest word's
//     documents only (one item's number among a hundred thousand that
//     share the word "item" costs a millisecond, not thirty);
//   - any of the words;
//   - near spellings of the words (fuzzyQuery), the costly kind, only when
//     the words as written find too little.
func (ix *Index) searchKeyword(ctx context.Context, text, scope string, size, need int) ([]keywordHit, error) {
	loose, _ := splitPhrases(text)
	multi := len(strings.Fields(loose)) > 1
	stages := []query.Query{exactQuery(text, scope, false)}
	if multi {
		stages = append([]query.Query{exactQuery(text, scope, true)}, stages...)
	}
	if fq, ok := fuzzyQuery(text, scope); ok {
		stages = append(stages, fq)
	}
	var out []keywordHit
	seen := map[string]bool{}
	for _, q := range stages {
		hits, err := ix.runKeyword(ctx, q, size, seen)
		if err != nil {
			return nil, err
		}
		if multi {
			for i := range hits {
				if adjacent.MatchString(hits[i].fragments) {
					hits[i].score *= adjacentBoost
				}
			}
			sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
		}
		for _, h := range hits {
			if len(out) == size {
				break
			}
			out = append(out, h)
			seen[h.id] = true
		}
		if len(out) >= need {
			break
		}
	}
	return out, nil
}

// runKeyword runs one bleve query, highlighting the hits, leaving out the
// ids in skip. The ranking runs without highlighting: a highlighted search
// reads the position of every matched word in every matching document,
// which costs most when most documents match; only the hits kept are then
// read again, with their fragments.
func (ix *Index) runKeyword(ctx context.Context, q query.Query, size int, skip map[string]bool) ([]keywordHit, error) {
	ranked, err := ix.bleve.SearchInContext(ctx, bleve.NewSearchRequestOptions(q, size+len(skip), 0, false))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, h := range ranked.Hits {
		if !skip[h.ID] {
			ids = append(ids, h.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	req := bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(bleve.NewDocIDQuery(ids), q), len(ids), 0, false)
	req.Highlight = bleve.NewHighlightWithStyle(highlightStyle)
	req.Highlight.Fields = []string{"body", "title"}
	res, err := ix.bleve.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	fragments := make(map[string]bsearch.FieldFragmentMap, len(res.Hits))
	for _, h := range res.Hits {
		fragments[h.ID] = h.Fragments
	}
	// In the ranking's order, with its scores: the second search scores
	// its own conjunction.
	out := make([]keywordHit, 0, len(ids))
	for _, h := range ranked.Hits {
		if skip[h.ID] {
			continue
		}
		// The fragment that shows a matched word, the body's first.
		snip, all := "", ""
		for _, f := range []string{"body", "title"} {
			if fr := fragments[h.ID][f]; len(fr) > 0 {
				if snip == "" || strings.Contains(fr[0], "**") && !strings.Contains(snip, "**") {
					snip = fr[0]
				}
				all += strings.Join(fr, "\n") + "\n"
			}
		}
		out = append(out, keywordHit{id: h.ID, score: h.Score, snippet: snip, fragments: all})
	}
	return out, nil
}
