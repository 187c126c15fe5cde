package toolscan

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Issue 36 (finding 6): every row of testdata/names.txt is refused,
// flagged as reading as the name it imitates, or fine, beside the names
// its offered line lists.
func TestNamesTable(t *testing.T) {
	data, err := os.ReadFile("testdata/names.txt")
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	rows := 0
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "offered "); ok {
			offered = strings.Fields(rest)
			continue
		}
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		name, _ := strconv.Unquote(q)
		want := strings.Fields(line[len(q):])
		rows++
		ok, why := ValidName(name)
		flags := Names(name, offered)
		switch want[0] {
		case "refused":
			if ok || why == "" {
				t.Errorf("line %d: %s is offered (%q)", i+1, ShowName(name), why)
			}
		case "flagged":
			if !ok {
				t.Errorf("line %d: %s is refused: %s", i+1, ShowName(name), why)
			}
			if len(flags) != 1 || flags[0].Kind != ConfusableName || flags[0].Field != NameField || !strings.Contains(flags[0].Why, want[1]) {
				t.Errorf("line %d: %s is flagged %+v, want one confusable_name naming %s", i+1, ShowName(name), flags, want[1])
			}
		case "fine":
			if !ok || len(flags) != 0 {
				t.Errorf("line %d: %s: offered %v (%s), flags %+v", i+1, ShowName(name), ok, why, flags)
			}
		default:
			t.Fatalf("line %d: unknown verdict %q", i+1, want[0])
		}
	}
	if rows < 20 {
		t.Fatalf("only %d rows read", rows)
	}
}

// A name is shown with every character outside printable ASCII as its
// code point, so a reviewer sees what renders as something else.
func TestShowNameWritesEveryHiddenCharacter(t *testing.T) {
	for in, want := range map[string]string{
		"lookup_colleagu\u0435": "lookup_colleagu<U+0435>",
		"echo\u200b":            "echo<U+200B>",
		"e\u202ecf":             "e<U+202E>cf",
		"a b<c>":                "a<U+0020>b<U+003C>c<U+003E>",
		"\xff":                  "<0xFF>",
		"Lookup_Colleague":      "Lookup_Colleague",
	} {
		if got := ShowName(in); got != want {
			t.Errorf("ShowName(%q) = %q, want %q", in, got, want)
		}
	}
}
