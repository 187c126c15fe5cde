package search

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
)

// MaxQueryBytes bounds a query: a query is stored nowhere, but past this it
// is a document, not a search, and it is refused rather than cut (OUT-2).
const MaxQueryBytes = 400

// The modes a query asks for, and the one an answer serves when nothing
// could be ranked.
const (
	ModeHybrid   = "hybrid"
	ModeKeyword  = "keyword"
	ModeSemantic = "semantic"
	ModeNone     = "none"
)

// Limits of a query's answer.
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// rrfK is reciprocal-rank fusion's constant: a document's fused score is
// the sum over the rankings of 1/(rrfK + its rank), so agreement between
// the rankings counts for more than one ranking's top place.
const rrfK = 60

// Query is one search.
type Query struct {
	Text  string
	Mode  string // "hybrid" (default when ""), "keyword", "semantic"
	Scope string // only documents of this scope; all when ""
	Limit int    // DefaultLimit when 0, at most MaxLimit
}

// Hit is one document found.
type Hit struct {
	ID    string
	Score float64 // keyword: bleve's score; semantic: cosine; hybrid: fused
	// Snippet is a fragment of the document with the matched words between
	// ** marks, or its opening when meaning alone found it.
	Snippet string
}

// Result is what a search answers.
type Result struct {
	// Mode is the ranking served: hybrid, keyword, semantic, or none
	// when nothing could be searched.
	Mode string
	// Degraded is a sentence whenever Mode differs from what was asked.
	Degraded string
	// Note is a sentence about how complete the answer is (the index
	// catching up, documents not yet embedded), even when Mode is the one
	// asked for.
	Note string
	Hits []Hit
}

// Search ranks the kind's documents against q. It refuses (invalid) an
// unknown mode, a query with no words, a query past MaxQueryBytes or past
// what the embeddings model can take, and a limit out of range; it never
// fails because the embeddings provider does: the answer degrades and says
// so.
func (ix *Index) Search(ctx context.Context, q Query) (Result, error) {
	mode := q.Mode
	if mode == "" {
		mode = ModeHybrid
	}
	// One model for the whole search, whatever an apply does meanwhile.
	w := ix.meaning.Load()
	if err := ix.checkQuery(q, mode, w); err != nil {
		return Result{}, err
	}
	if !ix.enter() {
		return Result{}, ix.closedRefusal()
	}
	defer ix.users.Done()
	limit := q.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	text := strings.TrimSpace(q.Text)
	res := Result{Mode: mode, Hits: []Hit{}}

	// A search right after a write on this node finds it (WR-3): wait,
	// briefly, for the keyword index to reach what the projection holds.
	wctx, cancel := context.WithTimeout(ctx, ix.opts.FreshWait)
	behind := ix.WaitFor(wctx, ix.opts.Node.Position()) != nil
	cancel()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	// Candidates: a few more than asked, for hits the projection no longer
	// shows; fusion looks deeper into both rankings.
	want := limit + 5
	if mode != ModeKeyword {
		want = 2*limit + 10
	}
	var (
		kw  []keywordHit
		sem []semanticHit
		why string // why meaning ranked nothing; "" when it ranked
	)
	if mode != ModeSemantic {
		var err error
		if kw, err = ix.searchKeyword(ctx, text, q.Scope, want, limit); err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			ix.log.Error("search: keyword search failed", "kind", ix.opts.Kind, "err", err)
			return Result{}, authority.Internal()
		}
	}
	if mode != ModeKeyword {
		sem, why = ix.searchMeaning(ctx, w, text, q.Scope, want)
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
	}

	var ranked []Hit
	switch {
	case mode == ModeKeyword:
		ranked = keywordRanking(kw)
	case why != "" && mode == ModeSemantic:
		res.Mode, res.Degraded = Unranked(mode, why, ix.opts.Noun)
		return res, nil
	case why != "":
		res.Mode, res.Degraded = Unranked(mode, why, ix.opts.Noun)
		ranked = keywordRanking(kw)
	case mode == ModeSemantic:
		ranked = semanticRanking(sem)
	default:
		ranked = fuse(kw, sem)
	}

	hits, err := ix.present(ranked, q.Scope, limit)
	if err != nil {
		return Result{}, err
	}
	res.Hits = hits
	var notes []string
	if behind {
		notes = append(notes, "The index was still catching up with the latest writes when this search ran, so something written in the last moments may be missing.")
	}
	if w != nil && (res.Mode == ModeSemantic || res.Mode == ModeHybrid) {
		if n := w.backlog(); n > 0 {
			notes = append(notes, fmt.Sprintf("%d %s(s) were still waiting for their vectors, so meaning could not rank them yet.", n, ix.opts.Noun))
		}
	}
	res.Note = strings.Join(notes, " ")
	return res, nil
}

// Unranked is the mode an answer serves, and the sentence that says so,
// when a search asked in mode had nothing to rank by meaning, for why (a
// clause: "no embeddings model is configured ..."). Semantic runs nothing
// and serves none, since an empty answer would read as "no such noun";
// hybrid is served by keyword alone. Keyword asked for is served as asked,
// with no sentence. Every search of the hub that cannot rank by meaning
// says so in these words, whatever it searches.
func Unranked(mode, why, noun string) (served, degraded string) {
	switch mode {
	case ModeKeyword:
		return ModeKeyword, ""
	case ModeSemantic:
		return ModeNone, fmt.Sprintf("Semantic search ran nothing: %s, so there was nothing to rank by meaning. An empty answer here says nothing about whether such a %s exists; search again with mode keyword.", why, noun)
	default:
		return ModeKeyword, fmt.Sprintf("Hybrid search was asked for, but %s, so these are ranked by keyword alone.", why)
	}
}

// checkQuery refuses what no ranking can serve, naming the field.
func (ix *Index) checkQuery(q Query, mode string, w *embedWorker) error {
	if err := CheckQuery(Query{Text: q.Text, Mode: mode, Limit: q.Limit}, ix.opts.Noun, MaxLimit); err != nil {
		return err
	}
	// The query's vector is made from the whole query or not at all: a
	// query cut to fit would be ranked as something not asked (OUT-3).
	if w == nil {
		return nil
	}
	if e := w.e; mode != ModeKeyword && len(strings.TrimSpace(q.Text)) > e.MaxInputBytes() {
		return authority.Refuse(authority.Invalid, "query is %d bytes, and the embeddings model %s takes at most %d, so it cannot be ranked by meaning whole. Shorten it, or search with mode keyword.", len(strings.TrimSpace(q.Text)), e.Model(), e.MaxInputBytes())
	}
	return nil
}

// CheckQuery refuses (invalid) what no search can serve, naming the
// field: a mode other than hybrid, keyword or semantic (empty is hybrid),
// a query past MaxQueryBytes or with no words, and a limit outside 0 to
// maxLimit. A search the hub hands to somebody else's index checks its
// query here too, so it is refused as the hub's own would be.
func CheckQuery(q Query, noun string, maxLimit int) error {
	switch q.Mode {
	case "", ModeHybrid, ModeKeyword, ModeSemantic:
	default:
		return authority.Refuse(authority.Invalid, "mode %q is not hybrid, keyword or semantic.", q.Mode)
	}
	if len(q.Text) > MaxQueryBytes {
		return authority.Refuse(authority.Invalid, "query is %d bytes; a search query is at most %d. Shorten it to the words the %s would say.", len(q.Text), MaxQueryBytes, noun)
	}
	if !strings.ContainsFunc(q.Text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return authority.Refuse(authority.Invalid, "query has no words to search for.")
	}
	if q.Limit < 0 || q.Limit > maxLimit {
		return authority.Refuse(authority.Invalid, "limit %d is outside 1 to %d.", q.Limit, maxLimit)
	}
	return nil
}

// searchMeaning ranks the kind's documents by the meaning of text. When it
// cannot, it answers why, as a clause for the degraded sentence.
func (ix *Index) searchMeaning(ctx context.Context, w *embedWorker, text, scope string, k int) ([]semanticHit, string) {
	if w == nil {
		return nil, "no embeddings model is configured for this hub (models.embeddings in the company file)"
	}
	if !w.isReady() {
		return nil, fmt.Sprintf("the embeddings model was just changed to %s and the %ss are still being embedded with it", w.model, ix.opts.Noun)
	}
	if w.vecs.len() == 0 {
		return nil, fmt.Sprintf("no %s has been embedded yet", ix.opts.Noun)
	}
	qctx, cancel := context.WithTimeout(ctx, ix.opts.QueryTimeout)
	defer cancel()
	vecs, err := w.e.Embed(qctx, []string{text})
	if err == nil && (len(vecs) != 1 || len(vecs[0]) == 0) {
		err = errors.New("the provider answered no vector")
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, "the search was cancelled"
		}
		// The provider's own words may carry its address; they go to the
		// log, and the answer says what happened in ours.
		ix.log.Warn("search: embedding a query failed; answering without meaning", "kind", ix.opts.Kind, "model", w.model, "err", err)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Sprintf("the embeddings provider did not answer within %s", ix.opts.QueryTimeout)
		}
		return nil, "the embeddings provider could not be reached or refused the query"
	}
	q := vecs[0]
	normalize(q)
	return w.vecs.nearest(q, scope, k), ""
}

func keywordRanking(kw []keywordHit) []Hit {
	out := make([]Hit, len(kw))
	for i, h := range kw {
		out[i] = Hit{ID: h.id, Score: h.score, Snippet: h.snippet}
	}
	return out
}

func semanticRanking(sem []semanticHit) []Hit {
	out := make([]Hit, len(sem))
	for i, h := range sem {
		out[i] = Hit{ID: h.id, Score: h.score}
	}
	return out
}

// fuse is reciprocal-rank fusion of the keyword and the semantic ranking.
func fuse(kw []keywordHit, sem []semanticHit) []Hit {
	byID := map[string]*Hit{}
	add := func(id string, rank int, snippet string) {
		h, ok := byID[id]
		if !ok {
			h = &Hit{ID: id}
			byID[id] = h
		}
		h.Score += 1 / float64(rrfK+rank)
		if h.Snippet == "" {
			h.Snippet = snippet
		}
	}
	for i, h := range kw {
		add(h.id, i+1, h.snippet)
	}
	for i, h := range sem {
		add(h.id, i+1, "")
	}
	out := make([]Hit, 0, len(byID))
	for _, h := range byID {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// present checks each ranked document against the projection as it is now
// — the indexes may still hold one just hidden, deleted or moved out of
// scope, and such a one is never answered — and fills in the snippets
// meaning alone has none for, up to limit hits.
func (ix *Index) present(ranked []Hit, scope string, limit int) ([]Hit, error) {
	out := make([]Hit, 0, min(limit, len(ranked)))
	err := ix.opts.Node.View(func(r pebble.Reader) error {
		for _, h := range ranked {
			if len(out) == limit {
				return nil
			}
			d, ok, err := ix.opts.Source(r, h.ID)
			if err != nil {
				return err
			}
			if !ok || d.Hidden || (scope != "" && d.Scope != scope) {
				continue
			}
			if h.Snippet == "" {
				h.Snippet = lead(d)
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
}
