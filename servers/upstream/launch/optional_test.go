package launch

import (
	"slices"
	"strings"
	"testing"
)

type optionalFile struct {
	Cases []struct {
		Name     string       `json:"name"`
		Declared declaredJSON `json:"declared"`
		Blocks   []seatJSON   `json:"blocks"`
		// Want holds one entry per expected violation: substrings its
		// sentence must all contain.
		Want [][]string `json:"want"`
	} `json:"cases"`
}

// TestCheckOptionalKeys covers CFG-4's write-time refusals from
// testdata/optional.json: exactly the listed violations, each naming the
// server and the key.
func TestCheckOptionalKeys(t *testing.T) {
	var f optionalFile
	loadCases(t, "optional.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var blocks []SeatBlock
			for _, b := range c.Blocks {
				blocks = append(blocks, SeatBlock(b))
			}
			got := CheckOptionalKeys(c.Declared.declared(), blocks)
			if len(got) != len(c.Want) {
				t.Fatalf("got %d violations, want %d:\n%s", len(got), len(c.Want), strings.Join(got, "\n"))
			}
			used := make([]bool, len(got))
		want:
			for _, subs := range c.Want {
				for i, g := range got {
					if !used[i] && containsAll(g, slices.Concat(subs, []string{c.Declared.Name})) {
						used[i] = true
						continue want
					}
				}
				t.Errorf("no violation contains %q:\n%s", subs, strings.Join(got, "\n"))
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestCheckOptionalKeysStable: the same document gives the same answer in
// the same order every time, whatever order Go iterates its maps in.
func TestCheckOptionalKeysStable(t *testing.T) {
	d := Declared{Name: "m", Transport: "http", URL: "https://${H}/",
		Headers:      map[string]string{"A": "1", "a": "2", "B": "3", "b": "4"},
		OptionalKeys: []string{"H", "X", "Y", "A"}}
	first := strings.Join(CheckOptionalKeys(d, nil), "\n")
	for range 50 {
		if got := strings.Join(CheckOptionalKeys(d, nil), "\n"); got != first {
			t.Fatalf("unstable:\n%s\nvs\n%s", got, first)
		}
	}
}
