package tracker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
)

func keys(out map[string]any) []string {
	var ks []string
	for _, it := range out["items"].([]any) {
		ks = append(ks, it.(map[string]any)["key"].(string))
	}
	return ks
}

// search_work_items ranks by keyword, names the mode it served, and says so
// when that is not the one asked for (TRK-1, KB-3): without an embeddings
// model hybrid is keyword alone and semantic runs nothing.
func TestSearch(t *testing.T) {
	h := newHarness(t)
	h.ok(alan, "create_work_item", map[string]any{"title": "Postgres connection pool exhausted", "description": "The pool runs dry under load."})
	h.ok(alan, "create_work_item", map[string]any{"title": "Update README", "description": "Mention the postgres setup."})
	h.ok(alan, "create_work_item", map[string]any{"title": "Logo colours"})
	kw := h.ok(alan, "search_work_items", map[string]any{"query": "postgres pool", "mode": "keyword"})
	if kw["mode"] != "keyword" || kw["degraded"] != nil || len(keys(kw)) != 2 || keys(kw)[0] != "CORE-1" {
		t.Fatalf("keyword %v", kw)
	}
	// The snippet marks the matched words, fenced as its writer's text.
	first := kw["items"].([]any)[0].(map[string]any)
	mustContain(t, first["snippet"].(string), servers.FenceOpen, "**pool**", "@alan")
	mustContain(t, kw["provenance"].(map[string]any)["note"].(string), "untrusted")

	hy := h.ok(alan, "search_work_items", map[string]any{"query": "postgres"})
	if hy["mode"] != "keyword" || len(keys(hy)) != 2 {
		t.Fatalf("hybrid %v", hy)
	}
	mustContain(t, hy["degraded"].(string), "Hybrid search was asked for", "no embeddings model", "keyword alone")
	se := h.ok(alan, "search_work_items", map[string]any{"query": "postgres", "mode": "semantic"})
	if se["mode"] != "none" || len(keys(se)) != 0 {
		t.Fatalf("semantic %v", se)
	}
	mustContain(t, se["degraded"].(string), "ran nothing", "says nothing about whether such a work item exists")

	// Stemmed: "exhausting" finds "exhausted". Narrowed to a project, the
	// other project's items are not answered.
	if got := keys(h.ok(alan, "search_work_items", map[string]any{"query": "exhausting", "mode": "keyword"})); len(got) != 1 || got[0] != "CORE-1" {
		t.Fatalf("stemming: %v", got)
	}
	if got := keys(h.ok(alan, "search_work_items", map[string]any{"query": "postgres", "mode": "keyword", "project": "ops"})); len(got) != 0 {
		t.Fatalf("another project's items: %v", got)
	}

	// An edit re-indexes: the old words stop matching at once (the next
	// read on this node sees the write).
	h.ok(alan, "update_work_item", map[string]any{"key": "CORE-1", "title": "Connection limits", "description": "Raise them."})
	if got := keys(h.ok(alan, "search_work_items", map[string]any{"query": "pool", "mode": "keyword"})); len(got) != 0 {
		t.Fatalf("stale text still found: %v", got)
	}
	if got := keys(h.ok(alan, "search_work_items", map[string]any{"query": "limits", "mode": "keyword"})); len(got) != 1 {
		t.Fatalf("new text not found: %v", got)
	}
	h.refused(alan, "search_work_items", map[string]any{"query": "x", "mode": "vibes"}, authority.Invalid)
	h.refused(alan, "search_work_items", map[string]any{"query": "x", "limit": 51}, authority.Invalid)
}

// A moved item is found under its new key, in its new project only.
func TestSearchAfterMove(t *testing.T) {
	h := newHarness(t)
	h.ok(ada, "create_work_item", map[string]any{"title": "Rotate the database credentials"})
	h.ok(ada, "move_work_item", map[string]any{"key": "CORE-1", "project": "OPS"})
	if got := keys(h.ok(ada, "search_work_items", map[string]any{"query": "credentials", "mode": "keyword"})); len(got) != 1 || got[0] != "OPS-1" {
		t.Fatalf("after the move: %v", got)
	}
	if got := keys(h.ok(ada, "search_work_items", map[string]any{"query": "credentials", "mode": "keyword", "project": "CORE"})); len(got) != 0 {
		t.Fatalf("still found in its old project: %v", got)
	}
}

// With an embeddings provider, an item is found by what it means when no
// word of it matches; hybrid fuses both rankings; a provider stopped
// mid-test degrades the answer with a sentence and fails no call; a query
// past 400 bytes is refused (TRK-1, KB-3, OUT-2).
func TestSearchByMeaning(t *testing.T) {
	p := searchtest.NewProvider(t)
	h := newHarnessWith(t, search.NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192))
	h.ok(alan, "create_work_item", map[string]any{"title": "My automobile will not start", "description": "The engine turns over but never catches."})
	h.ok(alan, "create_work_item", map[string]any{"title": "Car park closed"})
	h.ok(alan, "create_work_item", map[string]any{"title": "Soup recipe for the party"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.ix.WaitEmbedded(ctx, h.node.Position()); err != nil {
		t.Fatal(err)
	}
	kw := h.ok(alan, "search_work_items", map[string]any{"query": "car", "mode": "keyword"})
	if got := keys(kw); len(got) != 1 || got[0] != "CORE-2" {
		t.Fatalf("keyword: %v", got)
	}
	se := h.ok(alan, "search_work_items", map[string]any{"query": "car", "mode": "semantic"})
	if se["mode"] != "semantic" || se["degraded"] != nil || !contains(keys(se), "CORE-1") {
		t.Fatalf("semantic: %v", se)
	}
	hy := h.ok(alan, "search_work_items", map[string]any{"query": "car"})
	if got := keys(hy); hy["mode"] != "hybrid" || len(got) < 2 || got[0] != "CORE-2" || got[1] != "CORE-1" {
		t.Fatalf("hybrid: %v", hy)
	}
	h.refused(alan, "search_work_items", map[string]any{"query": strings.Repeat("car ", 101)}, authority.Invalid)

	p.Stop()
	hy = h.ok(alan, "search_work_items", map[string]any{"query": "car"})
	if got := keys(hy); hy["mode"] != "keyword" || len(got) != 1 || got[0] != "CORE-2" {
		t.Fatalf("hybrid with the provider down: %v", hy)
	}
	mustContain(t, hy["degraded"].(string), "embeddings provider", "keyword alone")
	se = h.ok(alan, "search_work_items", map[string]any{"query": "car", "mode": "semantic"})
	if se["mode"] != "none" || len(keys(se)) != 0 {
		t.Fatalf("semantic with the provider down: %v", se)
	}
	mustContain(t, se["degraded"].(string), "says nothing about whether such a work item exists")
	// Writes go on, and are found by keyword.
	h.ok(alan, "create_work_item", map[string]any{"title": "Sedan for sale"})
	if got := keys(h.ok(alan, "search_work_items", map[string]any{"query": "sedan"})); len(got) != 1 || got[0] != "CORE-4" {
		t.Fatalf("keyword while the provider is down: %v", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
