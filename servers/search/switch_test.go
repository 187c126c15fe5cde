package search

import (
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/search/searchtest"
)

// An embeddings model changed while the index is open (an apply, issue 27)
// re-embeds every document in the background: meanwhile a search is
// ranked by keyword and says why in the one sentence every search uses,
// and once the documents have their new vectors meaning ranks again, with
// vectors of the new model only. The second model's axes are the first's
// reversed, so a search by meaning finds the right document afterwards
// only if it was embedded again.
func TestChangedModelReembedsInTheBackground(t *testing.T) {
	p, emb := provider(t, 8192)
	h := newHarness(t, emb)
	h.put(
		doc("m1", "My automobile will not start", ""),
		doc("m2", "Soup for the offsite", ""),
		doc("m3", "Quarterly agenda", ""),
	)
	if res := h.search(Query{Text: "car", Mode: ModeSemantic}); res.Mode != ModeSemantic || ids(res)[0] != "m1" {
		t.Fatalf("before the change: %+v", res)
	}

	// The provider holds the new vectors back, so the change is seen
	// half done.
	p.SetDown(true)
	if err := h.ix.SetEmbedder(NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Reversed, 8192)); err != nil {
		t.Fatal(err)
	}
	hy := h.search(Query{Text: "automobile"})
	if hy.Mode != ModeKeyword || !slices.Equal(ids(hy), []string{"m1"}) {
		t.Fatalf("hybrid while re-embedding: %+v", hy)
	}
	mustContain(t, hy.Degraded, "Hybrid search was asked for", "changed to "+searchtest.Reversed, "keyword alone")
	sem := h.search(Query{Text: "car", Mode: ModeSemantic})
	if sem.Mode != ModeNone || len(sem.Hits) != 0 {
		t.Fatalf("semantic while re-embedding: %+v", sem)
	}
	mustContain(t, sem.Degraded, "still being embedded", "mode keyword")

	p.SetDown(false)
	h.settle(h.node.Position())
	sem = h.search(Query{Text: "car", Mode: ModeSemantic})
	if sem.Mode != ModeSemantic || sem.Degraded != "" || ids(sem)[0] != "m1" {
		t.Fatalf("after re-embedding: %+v", sem)
	}
	var models []string
	if err := h.node.View(func(r pebble.Reader) error {
		return scanVecRows(r, testKind, func(_ string, v vecRow) error {
			models = append(models, v.model)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(models) != 3 || slices.ContainsFunc(models, func(m string) bool { return m != searchtest.Reversed }) {
		t.Fatalf("vector rows after the change: %v", models)
	}

	// A new client of the same model (a rotated key) keeps the vectors:
	// meaning ranks at once, and nothing is embedded again.
	calls := p.Calls()
	if err := h.ix.SetEmbedder(NewOpenAIEmbedder(p.BaseURL(), "another-key", searchtest.Reversed, 8192)); err != nil {
		t.Fatal(err)
	}
	if res := h.search(Query{Text: "car"}); res.Mode != ModeHybrid || res.Degraded != "" {
		t.Fatalf("after a new key: %+v", res)
	}
	h.settle(h.node.Position())
	if got := p.Calls() - calls; got != 1 { // the query's own vector
		t.Fatalf("a new key for the same model made %d calls", got)
	}

	// No model any more: keyword only, said as at a start without one.
	if err := h.ix.SetEmbedder(nil); err != nil {
		t.Fatal(err)
	}
	res := h.search(Query{Text: "automobile"})
	if res.Mode != ModeKeyword || !strings.Contains(res.Degraded, "no embeddings model is configured") {
		t.Fatalf("without a model: %+v", res)
	}
}
