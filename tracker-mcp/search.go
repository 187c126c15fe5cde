package tracker

import (
	"context"
	"encoding/binary"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
)

// ---- search_work_items ----

// MaxQueryBytes bounds a search query: a query is stored nowhere, but past
// this it is a document, not a search, and it is refused rather than cut.
const MaxQueryBytes = 400

type searchIn struct {
	Query   string `json:"query" jsonschema:"what the item says, in words; at most 400 bytes"`
	Mode    string `json:"mode,omitempty" jsonschema:"hybrid (default), keyword or semantic"`
	Project string `json:"project,omitempty" jsonschema:"only this project's items"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 50; default 10"`
}

type searchHit struct {
	summary
	Score float64 `json:"score"`
}

type searchOut struct {
	Mode     string      `json:"mode"`
	Degraded string      `json:"degraded,omitempty"`
	Items    []searchHit `json:"items"`
}

func (s *srv) searchWorkItems(_ context.Context, _ authority.Caller, in searchIn) (searchOut, error) {
	if len(in.Query) > MaxQueryBytes {
		return searchOut{}, authority.Refuse(authority.Invalid, "query is %d bytes; a search query is at most %d. Shorten it to the words the item would say.", len(in.Query), MaxQueryBytes)
	}
	if len(tokens(in.Query)) == 0 {
		return searchOut{}, authority.Refuse(authority.Invalid, "query has no words to search for.")
	}
	limit := in.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 1 || limit > 50 {
		return searchOut{}, authority.Refuse(authority.Invalid, "limit %d is outside 1 to 50.", in.Limit)
	}
	mode := in.Mode
	if mode == "" {
		mode = "hybrid"
	}
	out := searchOut{Items: []searchHit{}}
	switch mode {
	case "semantic":
		// No embedding provider serves the tracker: nothing can be ranked by
		// meaning, so nothing is run, and an empty answer must not read as
		// "no such item".
		out.Mode = "none"
		out.Degraded = "Semantic search is not available here (no embedding provider), so nothing was searched; this says nothing about whether such an item exists. Search again with mode keyword."
		return out, nil
	case "hybrid":
		out.Mode = "keyword"
		out.Degraded = "Hybrid search was asked for, but with no embedding provider only the keyword half runs: these are ranked by keyword alone."
	case "keyword":
		out.Mode = "keyword"
	default:
		return searchOut{}, authority.Refuse(authority.Invalid, "mode %q is not hybrid, keyword or semantic.", in.Mode)
	}
	err := s.w.View(func(r pebble.Reader) error {
		hits, err := rankKeyword(r, in.Query, strings.ToUpper(strings.TrimSpace(in.Project)))
		if err != nil {
			return err
		}
		for _, h := range hits {
			if len(out.Items) == limit {
				break
			}
			var sm summary
			found, err := getJSON(r, kSummary+h.Key, &sm)
			if err != nil {
				return err
			}
			if found {
				out.Items = append(out.Items, searchHit{summary: sm, Score: float64(int(h.Score*1000)) / 1000})
			}
		}
		return nil
	})
	return out, err
}

// The keyword index is BM25 over titles and descriptions, kept in the
// projection so every node ranks from its own store: a posting per (term,
// item) holding the term's weighted frequency, each item's indexed length,
// and the corpus totals. Title words count twice, because a title is what an
// item says it is about.
const (
	bm25K1      = 1.2
	bm25B       = 0.75
	titleWeight = 2
)

var stopWords = map[string]bool{
	"the": true, "and": true, "for": true, "with": true, "that": true, "this": true,
	"from": true, "are": true, "was": true, "but": true, "not": true, "into": true,
	"its": true, "has": true, "have": true, "when": true, "what": true,
}

func tokens(s string) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if len([]rune(f)) >= 2 && !stopWords[f] {
			out = append(out, f)
		}
	}
	return out
}

func termFreqs(it *item) (map[string]uint32, uint32) {
	tf := map[string]uint32{}
	var n uint32
	for _, t := range tokens(it.Title) {
		tf[t] += titleWeight
		n += titleWeight
	}
	for _, t := range tokens(it.Description) {
		tf[t]++
		n++
	}
	return tf, n
}

type corpusStats struct {
	Docs  uint64 `json:"docs"`
	Total uint64 `json:"total"`
}

func postingKey(term, key string) []byte { return []byte(kPosting + term + "\x00" + key) }

func (a *applier) stats(delta int64, lenDelta int64) error {
	var s corpusStats
	if _, err := getJSON(a.R, kStats, &s); err != nil {
		return err
	}
	s.Docs = uint64(int64(s.Docs) + delta)
	s.Total = uint64(int64(s.Total) + lenDelta)
	return setJSON(a.B, kStats, s)
}

func (a *applier) indexText(it *item) error {
	tf, n := termFreqs(it)
	for t, f := range tf {
		if err := a.B.Set(postingKey(t, it.Key), binary.BigEndian.AppendUint32(nil, f), nil); err != nil {
			return err
		}
	}
	if err := a.B.Set([]byte(kDocLen+it.Key), binary.BigEndian.AppendUint32(nil, n), nil); err != nil {
		return err
	}
	return a.stats(1, int64(n))
}

func (a *applier) unindexText(it *item) error {
	tf, n := termFreqs(it)
	for t := range tf {
		if err := a.B.Delete(postingKey(t, it.Key), nil); err != nil {
			return err
		}
	}
	if err := a.B.Delete([]byte(kDocLen+it.Key), nil); err != nil {
		return err
	}
	return a.stats(-1, -int64(n))
}

type hit struct {
	Key   string
	Score float64
}

// rankKeyword scores every item holding a query term and answers them best
// first. project, when set, keeps only that project's items.
func rankKeyword(r pebble.Reader, query, project string) ([]hit, error) {
	var st corpusStats
	if _, err := getJSON(r, kStats, &st); err != nil {
		return nil, err
	}
	if st.Docs == 0 {
		return nil, nil
	}
	avg := float64(st.Total) / float64(st.Docs)
	scores := map[string]float64{}
	seen := map[string]bool{}
	for _, term := range tokens(query) {
		if seen[term] {
			continue
		}
		seen[term] = true
		prefix := kPosting + term + "\x00"
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(kPosting + term + "\x01")})
		if err != nil {
			return nil, err
		}
		type p struct {
			key string
			tf  uint32
		}
		var ps []p
		for it.First(); it.Valid(); it.Next() {
			k := strings.TrimPrefix(string(it.Key()), prefix)
			if project != "" && !strings.HasPrefix(k, project+"-") {
				continue
			}
			v := it.Value()
			if len(v) == 4 {
				ps = append(ps, p{k, binary.BigEndian.Uint32(v)})
			}
		}
		if err := it.Close(); err != nil {
			return nil, err
		}
		df := float64(len(ps))
		idf := math.Log(1 + (float64(st.Docs)-df+0.5)/(df+0.5))
		for _, x := range ps {
			dl := avg
			if v, closer, err := r.Get([]byte(kDocLen + x.key)); err == nil {
				if len(v) == 4 {
					dl = float64(binary.BigEndian.Uint32(v))
				}
				closer.Close()
			}
			f := float64(x.tf)
			scores[x.key] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*dl/avg))
		}
	}
	out := make([]hit, 0, len(scores))
	for k, s := range scores {
		out = append(out, hit{k, s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}
