package knowledge

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// KB-1: a seat writes pages into its unit's space by default — a folder,
// a page under it, a draft — and reads them back with body, breadcrumb and
// children; the list shows every page of the container in title order,
// drafts marked.
func TestWriteAndReadPages(t *testing.T) {
	h := newHarness(t)
	folder := h.write(alan, map[string]any{"title": "Runbooks"})
	page := h.write(alan, map[string]any{"title": "Restarting the queue", "body": "Drain first, then restart.", "parent": folder})
	h.write(alan, map[string]any{"title": "Half-written idea", "body": "maybe", "status": "draft"})

	got := h.page(page)
	if got["container"] != "CORE" || servers.Unfence(got["body"].(string)) != "Drain first, then restart." || servers.Unfence(got["title"].(string)) != "Restarting the queue" {
		t.Fatalf("page %v", got)
	}
	// OPS-4: a seat's own write names no credential.
	if h := got["history"].([]any)[0].(map[string]any); h["by"] != "alan" || h["operator_id"] != nil {
		t.Fatalf("history %v", h)
	}
	if ids := refIDs(got["breadcrumb"]); !slices.Equal(ids, []string{folder}) {
		t.Fatalf("breadcrumb %v", got["breadcrumb"])
	}
	f := h.page(folder)
	if f["folder"] != true || !slices.Equal(refIDs(f["children"]), []string{page}) {
		t.Fatalf("folder %v", f)
	}
	list := h.OK(alan, "list_pages", map[string]any{})
	var titles []string
	for _, p := range list["pages"].([]any) {
		m := p.(map[string]any)
		title := servers.Unfence(m["title"].(string))
		titles = append(titles, title)
		if title == "Half-written idea" && m["status"] != "draft" {
			t.Fatalf("the draft is not marked: %v", m)
		}
	}
	if !slices.Equal(titles, []string{"Half-written idea", "Restarting the queue", "Runbooks"}) || list["container"] != "CORE" {
		t.Fatalf("list %v", list)
	}
	top := h.OK(alan, "list_pages", map[string]any{"parent": "-"})["pages"].([]any)
	if len(top) != 2 {
		t.Fatalf("the container's top holds %d pages, want 2", len(top))
	}
	under := h.OK(alan, "list_pages", map[string]any{"parent": folder, "title": "QUEUE"})["pages"].([]any)
	if len(under) != 1 || under[0].(map[string]any)["id"] != page {
		t.Fatalf("under the folder, titled queue: %v", under)
	}
	p1 := h.OK(alan, "list_pages", map[string]any{"limit": 2})
	p2 := h.OK(alan, "list_pages", map[string]any{"limit": 2, "cursor": p1["next_cursor"]})
	if len(p1["pages"].([]any)) != 2 || len(p2["pages"].([]any)) != 1 || p2["next_cursor"] != nil {
		t.Fatalf("paging: %v then %v", p1, p2)
	}
}

// KB-2: a body links a page by id; the linked page lists who links to it,
// and a link to a page that does not exist reads as missing.
func TestLinkedFrom(t *testing.T) {
	h := newHarness(t)
	target := h.write(ada, map[string]any{"title": "Glossary", "body": "Words."})
	source := h.write(alan, map[string]any{"title": "Onboarding", "body": "Start with [the glossary](#/knowledge/pages/" + target + ") and [nothing](#/knowledge/pages/pg_ffff)."})
	if got := refIDs(h.page(target)["linked_from"]); !slices.Equal(got, []string{source}) {
		t.Fatalf("linked_from %v", got)
	}
	links := h.page(source)["links"].([]any)
	if len(links) != 2 || links[1].(map[string]any)["status"] != "missing" {
		t.Fatalf("links %v", links)
	}
	// The link goes, and so does the row.
	v := num(h.page(source)["version"])
	h.OK(alan, "save_page", map[string]any{"id": source, "version": v, "body": "No links now."})
	if got := h.page(target)["linked_from"]; got != nil {
		t.Fatalf("linked_from after the link went: %v", got)
	}
}

// KB-1: save_page states the version read; a parent moves the page and
// an empty one moves it to the top; watch follows and stops following
// without moving the version.
func TestSavePage(t *testing.T) {
	h := newHarness(t)
	a := h.write(ada, map[string]any{"title": "A"})
	b := h.write(ada, map[string]any{"title": "B", "body": "text"})
	out := h.OK(alan, "save_page", map[string]any{"id": b, "version": 1, "parent": a, "title": "B renamed", "body": "new text"})
	if num(out["version"]) != 2 || !slices.Equal(toStrings(out["changed"]), []string{"title", "body", "parent"}) {
		t.Fatalf("save %v", out)
	}
	if got := refIDs(h.page(a)["children"]); !slices.Equal(got, []string{b}) {
		t.Fatalf("children of A %v", got)
	}
	h.OK(alan, "save_page", map[string]any{"id": b, "version": 2, "parent": ""})
	if got := h.page(a)["children"]; got != nil {
		t.Fatalf("A still has children %v", got)
	}
	w := h.OK(grace, "save_page", map[string]any{"id": b, "version": 3, "watch": true})
	if num(w["version"]) != 3 || !slices.Equal(toStrings(h.page(b)["watchers"]), []string{"grace"}) {
		t.Fatalf("watch: %v; watchers %v", w, h.page(b)["watchers"])
	}
	// The old title is free again; the new one is taken.
	h.write(ada, map[string]any{"title": "B"})
	h.Refused(ada, "write_page", map[string]any{"title": "b RENAMED"}, authority.Exists)
}

// Every refusal the knowledge base's rules name, through the tools.
func TestPageRefusals(t *testing.T) {
	h := newHarness(t)
	core := h.write(ada, map[string]any{"title": "Core page", "body": "x"})
	child := h.write(ada, map[string]any{"title": "Child", "parent": core})
	opsPage := h.write(grace, map[string]any{"title": "Ops page"})
	for _, tc := range []struct {
		name   string
		caller authority.Caller
		tool   string
		args   map[string]any
		class  authority.Class
		says   string
	}{
		{"title taken", alan, "write_page", map[string]any{"title": "core PAGE"}, authority.Exists, "already has a page titled"},
		{"parent in another container", ada, "write_page", map[string]any{"title": "New", "parent": opsPage}, authority.Invalid, "own container"},
		{"parent that is no page", ada, "write_page", map[string]any{"title": "New", "parent": "pg_999"}, authority.Invalid, "names no page"},
		{"parent under itself", ada, "save_page", map[string]any{"id": core, "version": 1, "parent": child}, authority.Invalid, "under itself"},
		{"parent itself", ada, "save_page", map[string]any{"id": core, "version": 1, "parent": core}, authority.Invalid, "under itself"},
		{"a status that is neither", ada, "write_page", map[string]any{"title": "New", "status": "archived"}, authority.Invalid, "neither published nor draft"},
		{"watch that is not a boolean", ada, "save_page", map[string]any{"id": core, "version": 1, "watch": "yes"}, authority.Invalid, "watch"},
		{"a reserved container", alan, "write_page", map[string]any{"title": "Secret", "container": "agent_diary"}, authority.Forbidden, "engine keeps for itself"},
		{"a container no unit keeps", alan, "write_page", map[string]any{"title": "X", "container": "NOPE"}, authority.Invalid, "no unit's space"},
		{"no default container", zed, "write_page", map[string]any{"title": "X"}, authority.Invalid, "container is required"},
		{"a page nobody wrote", ada, "get_page", map[string]any{"id": "pg_999"}, authority.NotFound, "No page"},
		{"a title on two lines", ada, "write_page", map[string]any{"title": "one\ntwo"}, authority.Invalid, "line break"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.Refused(tc.caller, tc.tool, tc.args, tc.class)
			if tc.says != "" {
				mustContain(t, r.Sentence, tc.says)
			}
		})
	}
}

// KB-1: an edit over a newer version is refused stale_version with what
// changed since, by whom; the edit made on the live version lands.
func TestStaleVersionSaysWhatChanged(t *testing.T) {
	h := newHarness(t)
	id := h.write(ada, map[string]any{"title": "Decision log", "body": "v1"})
	h.OK(grace, "save_page", map[string]any{"id": id, "version": 1, "body": "v2"})
	r := h.Refused(alan, "save_page", map[string]any{"id": id, "version": 1, "body": "my edit"}, authority.StaleVersion)
	mustContain(t, r.Sentence, "version 2", "changed body by grace")
	if num(r.Data["version"]) != 2 || len(r.Data["changed_since"].([]any)) != 1 {
		t.Fatalf("refusal data %v", r.Data)
	}
	h.OK(alan, "save_page", map[string]any{"id": id, "version": 2, "body": "my edit"})
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, s := range list {
		out = append(out, s.(string))
	}
	return out
}
