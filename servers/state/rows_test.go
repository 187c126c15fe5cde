package state

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A projection row reads back as it was written; a missing row is not
// found; a broken row is an error that names its key, whether the key came
// as a string (a point read) or as an iterator's bytes (a walk).
func TestRowsRoundTrip(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type row struct {
		Title string   `json:"title"`
		Tags  []string `json:"tags"`
	}
	b := db.NewBatch()
	if err := SetJSON(b, "item/A-1", row{Title: "first", Tags: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("item/A-2"), []byte(`{"title":`), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}

	var got row
	if found, err := GetJSON(db, "item/A-1", &got); !found || err != nil || got.Title != "first" || len(got.Tags) != 1 {
		t.Fatalf("a written row: %v %v %+v", found, err, got)
	}
	if found, err := GetJSON(db, "item/A-9", &got); found || err != nil {
		t.Fatalf("a missing row: %v %v", found, err)
	}
	if found, err := GetJSON(db, "item/A-2", &got); found || err == nil || !strings.Contains(err.Error(), `"item/A-2"`) {
		t.Fatalf("a broken row read at its key: %v %v", found, err)
	}

	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("item/"), UpperBound: Upper("item/")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var walked []string
	for ok := it.First(); ok; ok = it.Next() {
		var r row
		if err := DecodeJSON(it.Key(), it.Value(), &r); err != nil {
			walked = append(walked, err.Error())
			continue
		}
		walked = append(walked, r.Title)
	}
	if len(walked) != 2 || walked[0] != "first" || !strings.Contains(walked[1], `"item/A-2"`) {
		t.Fatalf("a walk over both rows: %q", walked)
	}
}
