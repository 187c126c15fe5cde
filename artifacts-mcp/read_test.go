package artifacts

import (
	"context"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// OUT-2, OUT-3: a file longer than a page, read without an offset, is
// answered whole but condensed by the reader's auxiliary model: fenced as
// its writer's text, labelled condensed, saying which model and how to
// read it as written. With an offset it is read as written, page by page.
// Where nothing condenses it the answer is its first page, saying why and
// where to read on; it is never cut silently.
func TestLongFileCondensed(t *testing.T) {
	long := strings.Repeat("<p>A line of the plan.</p>\n", 4000) // ~108 KB, two pages
	var readers []string
	h := newHarness(t, func(_ *state.Options, d *Deps) {
		d.Condense = func(_ context.Context, c authority.Caller, text string, budget int) (string, string, error) {
			if text != long || budget != pageBytes {
				t.Errorf("condensing %d bytes to %d, want the whole file to a page", len(text), budget)
			}
			readers = append(readers, c.Seat)
			return "The plan, condensed.", "fake/aux", nil
		}
	})
	id := h.create(alan, "Plan", long)

	file := asMap(h.OK(ada, "get_artifact", map[string]any{"id": id})["file"])
	text, _ := file["text"].(string)
	if servers.Unfence(text) != "The plan, condensed." || file["condensed"] != true || file["next_offset"] != nil {
		t.Fatalf("file %v", file)
	}
	mustContain(t, text, "what=condensed", "@alan (agent)")
	mustContain(t, file["note"].(string), "condensed by fake/aux", "offset 0")
	if len(readers) != 1 || readers[0] != "ada" {
		t.Fatalf("condensed for %v, want ada", readers)
	}

	file = asMap(h.OK(ada, "get_artifact", map[string]any{"id": id, "offset": 0})["file"])
	page := servers.Unfence(file["text"].(string))
	if file["condensed"] != nil || len(page) == 0 || len(page) > pageBytes || !strings.HasPrefix(long, page) || num(file["next_offset"]) != len(page) {
		t.Fatalf("an offset read %d bytes, next %v, condensed %v", len(page), file["next_offset"], file["condensed"])
	}
	if len(readers) != 1 {
		t.Fatal("a read with an offset was condensed")
	}

	// A short file is answered as written, with nothing to condense.
	short := h.create(alan, "Short", "<p>Short.</p>\n")
	if file := asMap(h.OK(ada, "get_artifact", map[string]any{"id": short})["file"]); servers.Unfence(file["text"].(string)) != "<p>Short.</p>\n" || len(readers) != 1 {
		t.Fatalf("short file %v, condensed for %v", file, readers)
	}
}

// OUT-2: where the reader's model cannot condense a long file, or no
// model here condenses, its first page is answered as written, saying why
// and where to read on.
func TestLongFileNotCondensed(t *testing.T) {
	long := strings.Repeat("<p>A line of the plan.</p>\n", 4000)
	for _, c := range []struct {
		name     string
		condense func(context.Context, authority.Caller, string, int) (string, string, error)
		why      string
	}{
		{"no model here", nil, "no model here condenses it"},
		{"the model failed", func(context.Context, authority.Caller, string, int) (string, string, error) {
			return "", "", authority.Refuse(authority.Unavailable, "the company names no model to condense with.")
		}, "it could not be condensed: the company names no model to condense with."},
	} {
		h := newHarness(t, func(_ *state.Options, d *Deps) { d.Condense = c.condense })
		id := h.create(alan, "Plan", long)
		file := asMap(h.OK(ada, "get_artifact", map[string]any{"id": id})["file"])
		page := servers.Unfence(file["text"].(string))
		if file["condensed"] != nil || !strings.HasPrefix(long, page) || num(file["next_offset"]) != len(page) {
			t.Fatalf("%s: %d bytes, next %v", c.name, len(page), file["next_offset"])
		}
		mustContain(t, file["note"].(string), "first page", c.why, "Read on with offset")
	}
}
