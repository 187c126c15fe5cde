package hub

import (
	"fmt"
	"testing"
)

// CAT-10, CAT-11: what a seat is offered is its own tools first, in the
// order they were filed, then the company's, in theirs; each name resolves
// to the row of the catalogue that holds it, and a name in neither
// resolves to nothing. Rows carry the catalogue they were filed in as
// their description, so the test can tell which one answered.
func TestSeatRegistryResolvesEachNameInItsCatalogue(t *testing.T) {
	row := func(name string, src Source, where string) Entry {
		e := entry(name, src)
		e.Description = where
		return e
	}
	company := NewCatalogue()
	if err := company.Add(row("lookup_colleague", SourceBuiltin, "company"), row("create_work_item", SourceBuiltin, "company"),
		row("search", SourceMCP("tavily"), "company")); err != nil {
		t.Fatal(err)
	}
	own := NewCatalogue()
	if err := own.Add(row("gh_create_issue", SourceMCP("github"), "own"), row("gh_list_prs", SourceMCP("github"), "own")); err != nil {
		t.Fatal(err)
	}
	reg := SeatRegistry(own, company)

	for name, want := range map[string]string{
		"gh_create_issue": "own", "gh_list_prs": "own",
		"lookup_colleague": "company", "create_work_item": "company", "search": "company",
	} {
		if e, ok := reg.Resolve(name); !ok || e.Name != name || e.Description != want {
			t.Errorf("Resolve(%q) = %q from %q (%v), want the %s row", name, e.Name, e.Description, ok, want)
		}
	}
	if e, ok := reg.Resolve("slack_post"); ok {
		t.Errorf("a name in neither catalogue resolved to %+v", e)
	}

	listed := func(r Registry) string {
		var out []string
		for _, e := range r.Entries() {
			out = append(out, fmt.Sprintf("%s@%s", e.Name, e.Description))
		}
		return fmt.Sprint(out)
	}
	want := "[gh_create_issue@own gh_list_prs@own lookup_colleague@company create_work_item@company search@company]"
	if got := listed(reg); got != want {
		t.Errorf("the seat is offered\n %s\nwant\n %s", got, want)
	}

	// A tool the seat's child lists after a restart joins its own tools,
	// still ahead of every company tool; one the company gains joins the
	// company's, at their end.
	if err := own.Replace(SourceMCP("github"), []Entry{row("gh_create_issue", SourceMCP("github"), "own"),
		row("gh_list_prs", SourceMCP("github"), "own"), row("gh_merge_pr", SourceMCP("github"), "own")}); err != nil {
		t.Fatal(err)
	}
	if err := company.Add(row("list_projects", SourceBuiltin, "company")); err != nil {
		t.Fatal(err)
	}
	want = "[gh_create_issue@own gh_list_prs@own gh_merge_pr@own lookup_colleague@company create_work_item@company search@company list_projects@company]"
	if got := listed(reg); got != want {
		t.Errorf("after both changed, the seat is offered\n %s\nwant\n %s", got, want)
	}
	if e, ok := reg.Resolve("gh_merge_pr"); !ok || e.Description != "own" {
		t.Errorf("the child's new tool: %+v %v", e, ok)
	}

	// The operator's registry is the company catalogue alone, in its order.
	if got, want := listed(CompanyRegistry(company)), "[lookup_colleague@company create_work_item@company search@company list_projects@company]"; got != want {
		t.Errorf("the operator is offered %s, want %s", got, want)
	}
	if _, ok := CompanyRegistry(company).Resolve("gh_create_issue"); ok {
		t.Error("the operator's registry resolves a seat's own tool")
	}
}
