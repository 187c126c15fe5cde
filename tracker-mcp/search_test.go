package tracker

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// search_work_items ranks by keyword, names the mode it served, and says so
// when that is not the one asked for.
func TestSearch(t *testing.T) {
	h := newHarness(t)
	h.ok(alan, "create_work_item", map[string]any{"title": "Postgres connection pool exhausted", "description": "The pool runs dry under load."})
	h.ok(alan, "create_work_item", map[string]any{"title": "Update README", "description": "Mention the postgres setup."})
	h.ok(alan, "create_work_item", map[string]any{"title": "Logo colours"})
	kw := h.ok(alan, "search_work_items", map[string]any{"query": "postgres pool", "mode": "keyword"})
	items := kw["items"].([]any)
	if kw["mode"] != "keyword" || kw["degraded"] != nil || len(items) != 2 || items[0].(map[string]any)["key"] != "CORE-1" {
		t.Fatalf("keyword %v", kw)
	}
	hy := h.ok(alan, "search_work_items", map[string]any{"query": "postgres"})
	if hy["mode"] != "keyword" || !strings.Contains(hy["degraded"].(string), "keyword") || len(hy["items"].([]any)) != 2 {
		t.Fatalf("hybrid %v", hy)
	}
	se := h.ok(alan, "search_work_items", map[string]any{"query": "postgres", "mode": "semantic"})
	if se["mode"] != "none" || len(se["items"].([]any)) != 0 {
		t.Fatalf("semantic %v", se)
	}
	mustContain(t, se["degraded"].(string), "nothing was searched", "says nothing about whether")
	// An edit re-indexes: the old words stop matching.
	h.ok(alan, "update_work_item", map[string]any{"key": "CORE-1", "title": "Connection limits", "description": "Raise them."})
	again := h.ok(alan, "search_work_items", map[string]any{"query": "pool", "mode": "keyword"})
	if len(again["items"].([]any)) != 0 {
		t.Fatalf("stale postings: %v", again)
	}
	h.refused(alan, "search_work_items", map[string]any{"query": "x", "mode": "vibes"}, authority.Invalid)
}
