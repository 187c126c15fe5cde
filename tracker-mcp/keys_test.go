package tracker

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// A list reads each summary off the index row it walks; a row written
// before index rows carried summaries sends it to the summary's own row.
func TestIndexedSummary(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	if err := state.SetJSON(b, kSummary+"CORE-1", summary{Key: "CORE-1", Title: "from its own row"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, row string
		n         int
		found     bool
		title     string
		err       string
	}{
		{name: "the index row's summary", row: `{"key":"CORE-1","title":"from the index"}`, n: 1, found: true, title: "from the index"},
		{name: "an index row without one", row: "", n: 1, found: true, title: "from its own row"},
		{name: "neither", row: "", n: 2, found: false},
		{name: "an index row that does not decode", row: `{"key":`, n: 1, err: `decode "trk/sum/CORE-1"`},
	} {
		var sm summary
		found, err := indexedSummary(db, []byte(c.row), "CORE", c.n, &sm)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one saying %s", c.name, err, c.err)
			}
			continue
		}
		if err != nil || found != c.found || sm.Title != c.title {
			t.Errorf("%s: found %v, title %q, %v; want found %v, title %q", c.name, found, sm.Title, err, c.found, c.title)
		}
	}
}

// WR-10: a list index row written before rows kept the title's writers is
// still answered fenced, as the writers its item names.
func TestListFencesARowWithoutWriters(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it := item{Key: "CORE-1", ID: "wi_1", Project: "CORE", Number: 1, Title: "Old row", Status: "todo",
		TitledBy: []servers.Author{servers.AuthorOf(alan), servers.AuthorOf(ada)}, CreatedBy: servers.AuthorOf(alan)}
	b := db.NewBatch()
	if err := state.SetJSON(b, kItem+it.Key, it); err != nil {
		t.Fatal(err)
	}
	if err := state.SetJSON(b, kIxProject+"CORE/"+pad(1), summary{Key: it.Key, Project: "CORE", Title: it.Title, Status: "todo"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	out, err := (&srv{}).list(db, authority.Caller{Seat: "ada", Kind: authority.KindHuman}, listIn{})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("list answered %v, %v", out, err)
	}
	title := out.Items[0].Title
	if servers.Unfence(title) != "Old row" || !strings.Contains(title, "@alan (agent), @ada (human)") {
		t.Fatalf("title %q", title)
	}
	if len(out.Provenance.Writers) != 2 {
		t.Fatalf("provenance names %v", out.Provenance.Writers)
	}
}
