package toolscan

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// row is one block of testdata/scan.txt.
type row struct {
	line   int
	tool   string
	others []string
	text   string
	params []Param
	flags  []string // "kind start end" or, in a parameter, "kind start end field"
	near   []Kind
}

func readRows(t *testing.T, path string) []row {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	var cur *row
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			if line == "" && cur != nil {
				rows = append(rows, *cur)
				cur = nil
			}
			continue
		}
		if cur == nil {
			cur = &row{line: i + 1}
		}
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "tool":
			cur.tool = rest
		case "others":
			for _, f := range strings.Fields(rest) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				cur.others = append(cur.others, strings.Repeat("x", n))
			}
		case "text":
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			s, _ := strconv.Unquote(q)
			if times, ok := strings.CutPrefix(strings.TrimSpace(rest[len(q):]), "* "); ok {
				n, err := strconv.Atoi(times)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				s = strings.Repeat(s, n)
			}
			cur.text = s
		case "param":
			field, q, _ := strings.Cut(rest, " ")
			text, err := strconv.Unquote(q)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			cur.params = append(cur.params, Param{Field: field, Text: text})
		case "flag":
			cur.flags = append(cur.flags, rest)
		case "near":
			cur.near = append(cur.near, Kind(rest))
		default:
			t.Fatalf("line %d: unknown word %q", i+1, word)
		}
	}
	if cur != nil {
		rows = append(rows, *cur)
	}
	return rows
}

// Issue 28, item 4: every row of testdata/scan.txt produces exactly the
// flags it lists, at the spans it lists; a negative row produces none of
// the kind it is near.
func TestScanTable(t *testing.T) {
	for _, r := range readRows(t, "testdata/scan.txt") {
		t.Run(fmt.Sprintf("line%d", r.line), func(t *testing.T) {
			flags := Scan(Tool{Name: r.tool, Description: r.text, Params: r.params}, r.others)
			var got []string
			for _, f := range flags {
				text := r.text
				if f.Field == "" {
					got = append(got, fmt.Sprintf("%s %d %d", f.Kind, f.Start, f.End))
				} else {
					got = append(got, fmt.Sprintf("%s %d %d %s", f.Kind, f.Start, f.End, f.Field))
					text = ""
					for _, p := range r.params {
						if p.Field == f.Field {
							text = p.Text
						}
					}
				}
				if f.Start < 0 || f.End > len(text) || f.Start >= f.End {
					t.Errorf("flag %+v has no span in a text of %d bytes", f, len(text))
				}
				if f.Why == "" {
					t.Errorf("flag %+v says no reason", f)
				}
			}
			if len(r.near) > 0 {
				for _, f := range flags {
					for _, k := range r.near {
						if f.Kind == k {
							t.Errorf("negative row flagged %s at %d-%d of %q: %q", k, f.Start, f.End, f.Field, f.Text)
						}
					}
				}
				if len(r.flags) == 0 {
					return
				}
			}
			if strings.Join(got, "\n") != strings.Join(r.flags, "\n") {
				t.Errorf("flags of %q:\n got: %q\nwant: %q", r.text, got, r.flags)
			}
		})
	}
}

// Issue 28, Done-when: the table has positive and negative rows, for
// every kind the scanner can flag.
func TestScanTableCoversEveryKind(t *testing.T) {
	pos, neg := map[Kind]int{}, map[Kind]int{}
	for _, r := range readRows(t, "testdata/scan.txt") {
		for _, f := range r.flags {
			k, _, _ := strings.Cut(f, " ")
			pos[Kind(k)]++
		}
		for _, k := range r.near {
			neg[k]++
		}
	}
	for _, k := range []Kind{Invisible, Bidi, ToModel, Credential, Long} {
		if pos[k] == 0 || neg[k] == 0 {
			t.Errorf("kind %s: %d positive rows, %d negative", k, pos[k], neg[k])
		}
	}
	kinds := map[Kind]bool{Long: true}
	for _, r := range rules {
		kinds[r.kind] = true
	}
	for k := range pos {
		if !kinds[k] {
			t.Errorf("testdata names kind %q, which no rule has", k)
		}
	}
}

// A flag's text shows what a rendering would hide: each invisible or
// bidirectional character as its code point.
func TestShowNamesHiddenCharacters(t *testing.T) {
	if got := Show("a\u200bb\u202Ec\U000E0041"); got != "aU+200BbU+202EcU+E0041" {
		t.Fatalf("Show = %q", got)
	}
}

// Params reads every description of an input schema, at any depth and
// the schema's own, by JSON pointer; a property named description is a
// schema, not a description; what is not JSON has none.
func TestParamsReadsEveryDescription(t *testing.T) {
	schema := `{"type":"object","description":"Where to look.","properties":{
		"city":{"type":"string","description":"The city."},
		"a/b":{"type":"array","items":{"type":"string","description":"One tag."}},
		"description":{"type":"string"},
		"opts":{"anyOf":[{"type":"object","properties":{"x":{"description":"Nested."}}}]}}}`
	got := fmt.Sprint(Params([]byte(schema)))
	want := fmt.Sprint([]Param{{"/description", "Where to look."}, {"/properties/a~1b/items/description", "One tag."},
		{"/properties/city/description", "The city."}, {"/properties/opts/anyOf/0/properties/x/description", "Nested."}})
	if got != want {
		t.Fatalf("Params:\n got %s\nwant %s", got, want)
	}
	if p := Params([]byte("not json")); p != nil {
		t.Fatalf("Params of no JSON: %v", p)
	}
}
