package search

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/cockroachdb/pebble/v2"
)

func matchAll(n int) *bleve.SearchRequest {
	return bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), n, 0, false)
}

// Keyword ranking: stemmed words, a phrase in quotes, a near spelling, a
// title above a body, and the matched words marked in the snippet.
func TestKeywordRanking(t *testing.T) {
	h := newHarness(t, nil)
	h.put(
		doc("d1", "Indexing the log", "We indexed every entry of the operation log overnight."),
		doc("d2", "Connection pool", "The postgres connection pool runs dry under load."),
		doc("d3", "Pool party", "Bring towels; the connection to the venue is by bus."),
		doc("d4", "Release notes", "Mention the pool in passing."),
	)
	res := h.search(Query{Text: "index", Mode: ModeKeyword})
	if res.Mode != ModeKeyword || res.Degraded != "" || !slices.Equal(ids(res), []string{"d1"}) {
		t.Fatalf("stemming: %+v", res)
	}
	mustContain(t, res.Hits[0].Snippet, "**")

	// The words together outrank the words apart, and a title match
	// outranks a body match.
	res = h.search(Query{Text: "connection pool", Mode: ModeKeyword})
	if got := ids(res); len(got) < 3 || got[0] != "d2" {
		t.Fatalf("phrase ranking: %v", got)
	}
	mustContain(t, res.Hits[0].Snippet, "**connection**", "**pool**")

	// The same words, the one with them next to each other first, though it
	// is the longer one (which ranks lower by the words alone).
	h.put(doc("a-apart", "", "rotate the vault and audit keys"), doc("b-together", "", "audit the vault weekly and rotate keys"))
	if got := ids(h.search(Query{Text: "rotate keys", Mode: ModeKeyword})); len(got) != 2 || got[0] != "b-together" {
		t.Fatalf("adjacent words should rank first: %v", got)
	}

	// A document with every word ranks above one that says one word often.
	h.put(doc("p-often", "Pool pool pool", "pool"), doc("p-every", "", "by noon the tank was exhausted and the pool empty"))
	if got := ids(h.search(Query{Text: "pool exhausted", Mode: ModeKeyword})); len(got) < 2 || got[0] != "p-every" {
		t.Fatalf("every word should rank first: %v", got)
	}

	// In quotes, the phrase must appear as written.
	res = h.search(Query{Text: `"connection pool"`, Mode: ModeKeyword})
	if !slices.Equal(ids(res), []string{"d2"}) {
		t.Fatalf("quoted phrase: %v", ids(res))
	}

	// A near spelling is found.
	res = h.search(Query{Text: "postgers", Mode: ModeKeyword})
	if !slices.Equal(ids(res), []string{"d2"}) {
		t.Fatalf("fuzzy: %v", ids(res))
	}

	// An edit re-indexes: the old words stop matching, the new ones match.
	h.put(doc("d2", "Connection limits", "Raise them."))
	if res := h.search(Query{Text: "postgres", Mode: ModeKeyword}); len(res.Hits) != 0 {
		t.Fatalf("stale text still found: %v", ids(res))
	}
	if res := h.search(Query{Text: "limits", Mode: ModeKeyword}); !slices.Equal(ids(res), []string{"d2"}) {
		t.Fatalf("new text not found: %v", ids(res))
	}
	// Deleted, it is found by nothing.
	h.remove("d1")
	if res := h.search(Query{Text: "indexing", Mode: ModeKeyword}); len(res.Hits) != 0 {
		t.Fatalf("deleted document found: %v", ids(res))
	}
}

// A query narrowed to a scope finds nothing of another scope; a document
// moved to another scope moves with it.
func TestScope(t *testing.T) {
	p, emb := provider(t, 8192)
	_ = p
	h := newHarness(t, emb)
	h.put(Doc{ID: "a1", Title: "Invoice run", Scope: "A"}, Doc{ID: "b1", Title: "Invoice export", Scope: "B"})
	for _, mode := range []string{ModeKeyword, ModeSemantic, ModeHybrid} {
		res := h.search(Query{Text: "invoice", Mode: mode, Scope: "B"})
		if !slices.Equal(ids(res), []string{"b1"}) {
			t.Fatalf("%s in scope B: %v", mode, ids(res))
		}
	}
	h.put(Doc{ID: "a1", Title: "Invoice run", Scope: "B"})
	for _, mode := range []string{ModeKeyword, ModeSemantic, ModeHybrid} {
		if res := h.search(Query{Text: "invoice", Mode: mode, Scope: "A"}); len(res.Hits) != 0 {
			t.Fatalf("%s: a moved document is still found in its old scope: %v", mode, ids(res))
		}
		if res := h.search(Query{Text: "invoice", Mode: mode, Scope: "B"}); len(res.Hits) != 2 {
			t.Fatalf("%s: the moved document is not found in its new scope: %v", mode, ids(res))
		}
	}
}

// A keyword search narrowed to a scope answers the scope's documents that
// match its words, not every document of the scope: a container's pages
// that do not say what was asked are no answer (KB-3, issue 30).
func TestScopedKeywordMatchesWords(t *testing.T) {
	h := newHarness(t, nil)
	h.put(Doc{ID: "a1", Title: "Invoice run", Body: "Monthly billing.", Scope: "A"},
		Doc{ID: "a2", Title: "Holiday rota", Body: "Who is away in August.", Scope: "A"})
	if res := h.search(Query{Text: "zebra", Mode: ModeKeyword, Scope: "A"}); len(res.Hits) != 0 {
		t.Fatalf("a word no document says found %v", ids(res))
	}
	if res := h.search(Query{Text: "invoice", Mode: ModeKeyword, Scope: "A"}); !slices.Equal(ids(res), []string{"a1"}) {
		t.Fatalf("invoice in scope A: %v", ids(res))
	}
}

// A hidden document (a draft) is found by no search, in any mode, until it
// is shown; hidden again, it is gone again (KB-3).
func TestHiddenNeverFound(t *testing.T) {
	_, emb := provider(t, 8192)
	h := newHarness(t, emb)
	draft := Doc{ID: "p1", Title: "Car maintenance", Body: "Check the automobile's oil.", Scope: "A", Hidden: true}
	h.put(draft, doc("p2", "Weather", "Rain tomorrow."))
	for _, mode := range []string{ModeKeyword, ModeSemantic, ModeHybrid} {
		if res := h.search(Query{Text: "car automobile maintenance", Mode: mode}); slices.Contains(ids(res), "p1") {
			t.Fatalf("%s found the draft: %+v", mode, res)
		}
	}
	if got := vectorIDs(t, h.node, h.ix); slices.Contains(got, "p1") {
		t.Fatalf("a draft has a vector: %v", got)
	}
	draft.Hidden = false
	h.put(draft)
	for _, mode := range []string{ModeKeyword, ModeSemantic, ModeHybrid} {
		if res := h.search(Query{Text: "car maintenance", Mode: mode}); !slices.Contains(ids(res), "p1") {
			t.Fatalf("%s does not find the published page: %+v", mode, res)
		}
	}
	draft.Hidden = true
	h.put(draft)
	for _, mode := range []string{ModeKeyword, ModeSemantic, ModeHybrid} {
		if res := h.search(Query{Text: "car maintenance", Mode: mode}); slices.Contains(ids(res), "p1") {
			t.Fatalf("%s found the page hidden again: %+v", mode, res)
		}
	}
}

// Meaning finds a document no keyword matches, and hybrid fuses both
// rankings: the keyword match and the meaning match are both answered.
func TestMeaningAndHybrid(t *testing.T) {
	p, emb := provider(t, 8192)
	h := newHarness(t, emb)
	h.put(
		doc("m1", "My automobile will not start", "The engine turns over but never catches."),
		doc("m2", "Car park closed", "Use the street."),
		doc("m3", "Soup recipe", "Simmer for an hour."),
	)
	// No word of m1 is "car": keyword search cannot find it.
	kw := h.search(Query{Text: "car", Mode: ModeKeyword})
	if !slices.Equal(ids(kw), []string{"m2"}) {
		t.Fatalf("keyword: %v", ids(kw))
	}
	sem := h.search(Query{Text: "car", Mode: ModeSemantic})
	if sem.Mode != ModeSemantic || sem.Degraded != "" || !slices.Contains(ids(sem), "m1") {
		t.Fatalf("semantic: %+v", sem)
	}
	if slices.Contains(ids(sem)[:2], "m3") {
		t.Fatalf("semantic ranks soup among cars: %v", ids(sem))
	}
	// Found by meaning alone, its snippet is its opening.
	for _, hit := range sem.Hits {
		if hit.ID == "m1" && !strings.HasPrefix(hit.Snippet, "The engine") {
			t.Fatalf("snippet of a meaning-only hit: %q", hit.Snippet)
		}
	}
	hy := h.search(Query{Text: "car"})
	if hy.Mode != ModeHybrid || hy.Degraded != "" {
		t.Fatalf("hybrid: %+v", hy)
	}
	got := ids(hy)
	if len(got) < 2 || got[0] != "m2" || got[1] != "m1" {
		t.Fatalf("hybrid should rank the document both rankings agree on first, then the meaning match: %v", got)
	}
	if p.Calls() == 0 {
		t.Fatal("the provider was never called")
	}
}

// A provider that stops mid-test degrades every answer with a sentence and
// fails no search: hybrid answers by keyword, semantic runs nothing and
// says an empty answer proves nothing.
func TestProviderDownDegrades(t *testing.T) {
	p, emb := provider(t, 8192)
	h := newHarness(t, emb)
	h.put(doc("m1", "My automobile will not start", ""), doc("m2", "Car park closed", ""))
	if res := h.search(Query{Text: "car"}); res.Mode != ModeHybrid {
		t.Fatalf("before the stop: %+v", res)
	}
	p.Stop()
	hy := h.search(Query{Text: "car"})
	if hy.Mode != ModeKeyword || !slices.Equal(ids(hy), []string{"m2"}) {
		t.Fatalf("hybrid with the provider down: %+v", hy)
	}
	mustContain(t, hy.Degraded, "Hybrid search was asked for", "embeddings provider", "keyword alone")
	sem := h.search(Query{Text: "car", Mode: ModeSemantic})
	if sem.Mode != ModeNone || len(sem.Hits) != 0 {
		t.Fatalf("semantic with the provider down: %+v", sem)
	}
	mustContain(t, sem.Degraded, "embeddings provider", "says nothing about whether", "mode keyword")
	if strings.Contains(sem.Degraded+hy.Degraded, "127.0.0.1") {
		t.Fatalf("the provider's address leaked into an answer: %q / %q", hy.Degraded, sem.Degraded)
	}
	// Keyword indexing goes on while the provider is down.
	pos := h.write(docPayload{Doc: doc("m3", "Sedan for sale", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*1e9)
	defer cancel()
	if err := h.ix.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
	if res := h.search(Query{Text: "sedan", Mode: ModeKeyword}); !slices.Equal(ids(res), []string{"m3"}) {
		t.Fatalf("keyword while the provider is down: %v", ids(res))
	}
}

// Documents still waiting for their vectors are said in a note, and ranked
// by meaning once they have them.
func TestNoteOnDocumentsWaitingForVectors(t *testing.T) {
	p, emb := provider(t, 8192)
	h := newHarness(t, emb)
	h.put(doc("v1", "Car for sale", ""))
	p.Poison("Sedan")
	pos := h.write(docPayload{Doc: doc("v2", "Sedan with a new engine", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.ix.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
	res := h.search(Query{Text: "automobile", Mode: ModeSemantic})
	if res.Mode != ModeSemantic || !slices.Equal(ids(res), []string{"v1"}) {
		t.Fatalf("semantic while v2 waits: %+v", res)
	}
	mustContain(t, res.Note, "1 document(s) were still waiting for their vectors")
	p.Poison("")
	h.settle(pos) // the embedder retries on its own
	res = h.search(Query{Text: "automobile", Mode: ModeSemantic})
	if res.Note != "" || !slices.Equal(sortedIDs(res), []string{"v1", "v2"}) {
		t.Fatalf("once embedded: %+v", res)
	}
}

// Without an embeddings model search is keyword only, and says so.
func TestNoEmbedder(t *testing.T) {
	h := newHarness(t, nil)
	h.put(doc("d1", "Postgres pool", ""))
	hy := h.search(Query{Text: "postgres"})
	if hy.Mode != ModeKeyword || !slices.Equal(ids(hy), []string{"d1"}) {
		t.Fatalf("hybrid: %+v", hy)
	}
	mustContain(t, hy.Degraded, "no embeddings model is configured", "keyword alone")
	sem := h.search(Query{Text: "postgres", Mode: ModeSemantic})
	if sem.Mode != ModeNone || len(sem.Hits) != 0 {
		t.Fatalf("semantic: %+v", sem)
	}
	mustContain(t, sem.Degraded, "ran nothing", "says nothing about whether such a document exists")
}

// Before any document has a vector, meaning has nothing to rank by, and
// says so rather than answering an empty list as if it had looked.
func TestNothingEmbeddedYet(t *testing.T) {
	p, emb := provider(t, 8192)
	p.SetDown(true)
	h := newHarness(t, emb)
	pos := h.write(docPayload{Doc: doc("d1", "Car", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*1e9)
	defer cancel()
	if err := h.ix.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
	sem := h.search(Query{Text: "automobile", Mode: ModeSemantic})
	if sem.Mode != ModeNone {
		t.Fatalf("semantic: %+v", sem)
	}
	mustContain(t, sem.Degraded, "no document has been embedded yet", "says nothing about whether")
	p.SetDown(false)
}

// Refusals: an unknown mode, a query with no words, a query past 400
// bytes, and a query the model cannot take whole, which is refused before
// anything is sent to the provider (OUT-2, OUT-3, KB-3).
func TestQueryRefusals(t *testing.T) {
	p, emb := provider(t, 64) // 48 bytes
	h := newHarness(t, emb)
	mustContain(t, h.refused(Query{Text: "x", Mode: "vibes"}).Sentence, "vibes")
	mustContain(t, h.refused(Query{Text: "  ?! "}).Sentence, "no words")
	mustContain(t, h.refused(Query{Text: strings.Repeat("word ", 81)}).Sentence, "405 bytes", "400")
	mustContain(t, h.refused(Query{Text: "x", Limit: MaxLimit + 1}).Sentence, "limit")
	before := p.Calls()
	long := strings.Repeat("automobile ", 6) // 65 bytes, trimmed
	mustContain(t, h.refused(Query{Text: long, Mode: ModeSemantic}).Sentence, "65 bytes", "at most 48", "mode keyword")
	mustContain(t, h.refused(Query{Text: long}).Sentence, "at most 48")
	if p.Calls() != before {
		t.Fatalf("a query past the model's bound reached the provider")
	}
	// By keyword alone the same query is fine.
	if res := h.search(Query{Text: long, Mode: ModeKeyword}); res.Mode != ModeKeyword {
		t.Fatalf("keyword: %+v", res)
	}
	// The embedder itself refuses before sending, whoever calls it.
	if _, err := emb.Embed(context.Background(), []string{long}); err == nil || !strings.Contains(err.Error(), "at most 48") {
		t.Fatalf("Embed of an input past the bound: %v", err)
	}
	if p.Calls() != before {
		t.Fatalf("an input past the model's bound reached the provider")
	}
}

// A document longer than the model's bound is embedded from its opening,
// cut after a whole sentence, and never sent whole (OUT-2).
func TestLongDocumentEmbedsItsOpening(t *testing.T) {
	p, emb := provider(t, 16+120) // 120 bytes
	h := newHarness(t, emb)
	body := "The automobile is parked outside. It has four wheels and a red roof. " +
		"Nobody has driven it since spring, and the battery is flat by now. The end."
	h.put(doc("long", "Car", body))
	var sent string
	for _, in := range p.Inputs() {
		if strings.HasPrefix(in, "Car") {
			sent = in
		}
	}
	if sent == "" || len(sent) > 120 {
		t.Fatalf("input sent: %q (%d bytes)", sent, len(sent))
	}
	if !strings.HasSuffix(sent, "red roof.") {
		t.Fatalf("the opening is not cut after a whole sentence: %q", sent)
	}
	if res := h.search(Query{Text: "vehicle", Mode: ModeSemantic}); !slices.Equal(ids(res), []string{"long"}) {
		t.Fatalf("semantic: %v", ids(res))
	}
}

func TestOpening(t *testing.T) {
	for _, tc := range []struct {
		text string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"First paragraph here.\n\nSecond one is longer.", 30, "First paragraph here."},
		{"One. Two three four. Five", 22, "One. Two three four."},
		{"alpha beta gamma delta", 13, "alpha beta"},
		{"abcdefghij", 4, "abcd"},
		{"héllo", 2, "h"}, // never half a character
		{"A.\n\nB is a much longer second paragraph. And more.", 45, "A.\n\nB is a much longer second paragraph."},
	} {
		if got := opening(tc.text, tc.max); got != tc.want {
			t.Errorf("opening(%q, %d) = %q, want %q", tc.text, tc.max, got, tc.want)
		}
	}
}

// A vector whose text changed is computed again; one whose text did not is
// left alone.
func TestStaleVectorRecomputed(t *testing.T) {
	p, emb := provider(t, 8192)
	h := newHarness(t, emb)
	h.put(doc("v1", "Soup recipe", ""))
	if res := h.search(Query{Text: "cooking", Mode: ModeSemantic}); len(res.Hits) == 0 || res.Hits[0].ID != "v1" {
		t.Fatalf("before: %v", ids(res))
	}
	h.put(doc("v1", "Storm warning", ""))
	if res := h.search(Query{Text: "weather", Mode: ModeSemantic}); len(res.Hits) == 0 || res.Hits[0].ID != "v1" || res.Hits[0].Score < 0.9 {
		t.Fatalf("after: %+v", res)
	}
	n := len(p.Inputs())
	// Moved to another scope: no new vector, just its scope.
	h.put(Doc{ID: "v1", Title: "Storm warning", Scope: "B"})
	if len(p.Inputs()) != n {
		t.Fatalf("a scope change re-embedded the text: %v", p.Inputs()[n:])
	}
	if res := h.search(Query{Text: "weather", Mode: ModeSemantic, Scope: "B"}); !slices.Equal(ids(res), []string{"v1"}) {
		t.Fatalf("in its new scope: %v", ids(res))
	}
}

// A deleted index directory is rebuilt from the projection on open, and
// answers as before; so is one that cannot be read.
func TestRebuildFromProjection(t *testing.T) {
	h := newHarness(t, nil)
	h.put(doc("r1", "Postgres pool", ""), doc("r2", "Logo colours", ""), Doc{ID: "r3", Title: "Postgres draft", Hidden: true})
	want := h.keywordIDs()
	if !slices.Equal(want, []string{"r1", "r2"}) {
		t.Fatalf("indexed: %v", want)
	}
	for _, damage := range []func(dir string) error{
		os.RemoveAll,
		func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.WriteFile(dir, []byte("not an index"), 0o600) // a file where the directory was
		},
	} {
		if err := h.ix.Close(); err != nil {
			t.Fatal(err)
		}
		if err := damage(h.ix.opts.Dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(h.ix.opts.Dir); err == nil {
			// The file case: rebuild removes it.
			t.Log("index directory replaced by a file")
		}
		h.open()
		if got := h.keywordIDs(); !slices.Equal(got, want) {
			t.Fatalf("rebuilt index holds %v, want %v", got, want)
		}
		if res := h.search(Query{Text: "postgres", Mode: ModeKeyword}); !slices.Equal(ids(res), []string{"r1"}) {
			t.Fatalf("search after rebuild: %v", ids(res))
		}
		if h.ix.Through() != h.node.Position() {
			t.Fatalf("rebuilt index at %d, projection at %d", h.ix.Through(), h.node.Position())
		}
	}
	// Writes after a rebuild are indexed as before.
	h.put(doc("r4", "Postgres upgrade", ""))
	if res := h.search(Query{Text: "postgres", Mode: ModeKeyword}); !slices.Equal(sortedIDs(res), []string{"r1", "r4"}) {
		t.Fatalf("after rebuild and a write: %v", ids(res))
	}
}

// Marks are pruned once the keyword index holds them on disk.
func TestMarksPruned(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 20 {
		h.put(doc("d", "Title", strings.Repeat("x", i)))
	}
	pos := h.node.Position()
	deadline := time.After(10 * time.Second)
	for {
		h.ix.pruneMu.Lock()
		pruned, moved := h.ix.pruned, h.ix.pruneMoved
		h.ix.pruneMu.Unlock()
		if pruned >= pos {
			break
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("marks pruned through %d, the index is at %d", pruned, pos)
		}
	}
	var left int
	err := h.node.View(func(r pebble.Reader) error {
		marks, _, err := readMarks(r, testKind, 0, h.node.Position(), 1000)
		left = len(marks)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d marks left after the index reached the projection", left)
	}
}

// Changes made while the index was closed are indexed when it opens, in
// as many rounds as the backlog takes.
func TestBacklogInRounds(t *testing.T) {
	defer func(n int) { roundMarks = n }(roundMarks)
	roundMarks = 3
	h := newHarness(t, nil)
	h.put(doc("first", "Backlog zero", ""))
	if err := h.ix.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		h.write(docPayload{Doc: doc(fmt.Sprintf("b%02d", i), "Backlog item", "")})
	}
	h.open()
	if h.ix.rebuilt {
		t.Fatal("the index was rebuilt instead of following its marks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.ix.WaitFor(ctx, h.node.Position()); err != nil {
		t.Fatal(err)
	}
	if res := h.search(Query{Text: "backlog", Mode: ModeKeyword, Limit: 20}); len(res.Hits) != 11 {
		t.Fatalf("after the backlog: %v", ids(res))
	}
	t.Logf("4 rounds in %v", time.Since(start))
}

// Close is safe twice, and a search after it is refused unavailable.
func TestCloseTwice(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ix.Search(context.Background(), Query{Text: "x"}); err == nil {
		t.Fatal("search after Close answered")
	}
}
