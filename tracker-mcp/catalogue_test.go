package tracker

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/authority"
)

var someStatuses = []map[string]any{{"key": "todo", "name": "To do", "category": "open"}, {"key": "doing", "name": "Doing", "category": "started"},
	{"key": "done", "name": "Done", "category": "done"}, {"key": "cancelled", "name": "Cancelled", "category": "cancelled"}}

// OPS-3, TRK-6: the work catalogue is written by people — an administrator
// (their seat, or an administrator's credential) or a unit lead — never by
// a seat, and never through a credential that is neither.
func TestWriteWorkCatalogueAuthority(t *testing.T) {
	h := newHarness(t)
	args := map[string]any{"statuses": someStatuses, "priorities": []string{"low", "high"}}
	ciAdmin := ciBot
	ciAdmin.Admin = true
	zedPerson := authority.Caller{Seat: "zed", Kind: authority.KindHuman, Requester: "zed", OperatorID: "zed-laptop"}
	rootPerson := authority.Caller{Seat: "root", Kind: authority.KindHuman, Requester: "root", OperatorID: "root-laptop"}
	for _, tc := range []struct {
		name   string
		caller authority.Caller
		class  authority.Class // empty: applied
	}{
		{"a seat", alan, authority.Forbidden},
		{"an unbound credential that is no administrator's", ciBot, authority.Forbidden},
		{"a person who neither leads nor administers", zedPerson, authority.Forbidden},
		{"an unbound administrator's credential", ciAdmin, ""},
		{"a unit lead", ada, ""},
		{"an administrator's seat", rootPerson, ""},
	} {
		if tc.class != "" {
			h.refused(tc.caller, "write_work_catalogue", args, tc.class)
			continue
		}
		if out := h.ok(tc.caller, "write_work_catalogue", args); out["outcome"] != "applied" {
			t.Errorf("%s: %v", tc.name, out)
		}
	}
	got := h.ok(alan, "get_work_catalogue", map[string]any{})
	if num(got["version"]) != 3 {
		t.Fatalf("catalogue version %v after three allowed writes", got["version"])
	}
}

// OPS-4: an administrator's unbound credential may do what a project's lead
// does; a plain unbound credential may not.
func TestAdministratorCredentialActsAsLead(t *testing.T) {
	h := newHarness(t)
	ciAdmin := ciBot
	ciAdmin.Admin = true
	h.ok(ada, "write_project_file", map[string]any{"path": "notes.md", "content": "x"})
	key := h.ok(alan, "create_work_item", map[string]any{"title": "Belongs in ops"})["key"]
	h.refused(ciBot, "remove_project_file", map[string]any{"project": "CORE", "path": "notes.md"}, authority.Forbidden)
	h.refused(ciBot, "move_work_item", map[string]any{"key": key, "project": "OPS"}, authority.Forbidden)
	h.refused(ciBot, "write_project", map[string]any{"project": "CORE", "name": "Renamed"}, authority.Forbidden)
	if out := h.ok(ciAdmin, "move_work_item", map[string]any{"key": key, "project": "OPS"}); out["key"] != "OPS-1" {
		t.Fatalf("move %v", out)
	}
	if out := h.ok(ciAdmin, "remove_project_file", map[string]any{"project": "CORE", "path": "notes.md"}); out["removed"] != true {
		t.Fatalf("remove %v", out)
	}
	if out := h.ok(ciAdmin, "write_project", map[string]any{"project": "CORE", "name": "Renamed"}); out["outcome"] != "applied" {
		t.Fatalf("rename %v", out)
	}
}

// TRK-1: status open lists every live item — any status whose category is
// open or started — alone or beside other filters, newest first.
func TestListOpenItems(t *testing.T) {
	h := newHarness(t)
	h.ok(ada, "write_work_catalogue", map[string]any{"statuses": someStatuses, "priorities": []string{"low", "high"}})
	for i, st := range []string{"todo", "doing", "done", "cancelled", "todo"} {
		args := map[string]any{"title": "Item " + st, "status": st}
		if i == 4 {
			args["assignee"] = "linus"
		}
		h.ok(ada, "create_work_item", args)
	}
	h.ok(grace, "create_work_item", map[string]any{"title": "Ops work", "project": "OPS", "status": "doing"})
	keys := func(args map[string]any) []string {
		var out []string
		for _, it := range h.ok(ada, "list_work_items", args)["items"].([]any) {
			out = append(out, it.(map[string]any)["key"].(string))
		}
		return out
	}
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"status": "open"}, []string{"OPS-1", "CORE-5", "CORE-2", "CORE-1"}},
		{map[string]any{"status": "open", "project": "CORE"}, []string{"CORE-5", "CORE-2", "CORE-1"}},
		{map[string]any{"status": "open", "assignee": "linus"}, []string{"CORE-5"}},
		{map[string]any{"status": "open", "project": "CORE", "limit": 2}, []string{"CORE-5", "CORE-2"}},
		{map[string]any{"status": "done"}, []string{"CORE-3"}},
	} {
		if got := keys(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("list %v = %v, want %v", tc.args, got, tc.want)
		}
	}
	r := h.refused(ada, "write_work_catalogue", map[string]any{"statuses": []map[string]any{{"key": "open", "name": "Open", "category": "open"}, {"key": "done", "name": "Done", "category": "done"}}, "priorities": []string{"low"}}, authority.Invalid)
	mustContain(t, r.Sentence, "reserves")
}
