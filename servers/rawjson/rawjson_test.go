package rawjson

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMembersAndElements(t *testing.T) {
	var keys, vals []string
	err := Members([]byte(` {"a" : 1, "b":[1, {"c":"d"}], "e":"\u00e9"} `), func(k, kr, v []byte) error {
		keys, vals = append(keys, string(k)+"="+string(kr)), append(vals, string(v))
		return nil
	})
	if err != nil || strings.Join(keys, " ") != `a="a" b="b" e="e"` || strings.Join(vals, " ") != `1 [1, {"c":"d"}] "\u00e9"` {
		t.Fatalf("%v %q %q", err, keys, vals)
	}
	var els []string
	if err := Elements([]byte(`[ 1 , "x", {} ]`), func(v []byte) error { els = append(els, string(v)); return nil }); err != nil ||
		strings.Join(els, "|") != `1|"x"|{}` {
		t.Fatalf("%v %q", err, els)
	}
	for _, bad := range []string{`{"a":1`, `{"a" 1}`, `{a:1}`, `{"a":1,}`, `{"\u0061":1}`, `{"a":1} x`} {
		if Members([]byte(bad), func(_, _, _ []byte) error { return nil }) == nil {
			t.Errorf("Members(%s) accepted", bad)
		}
	}
}

// Members and Elements take an object and an array exactly when
// encoding/json does: empty ones, white space around, and what must not
// follow the closing bracket or a comma.
func TestContainersAcceptWhatJSONAccepts(t *testing.T) {
	none := func(_, _, _ []byte) error { return nil }
	for _, in := range []string{`{}`, ` { } `, `{} x`, `{`, `{,}`, `{"a":1}`, `{"a":1,"b":2}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":1}}`, `[]`} {
		want := json.Valid([]byte(in)) && strings.HasPrefix(strings.TrimSpace(in), "{")
		if got := Members([]byte(in), none) == nil; got != want {
			t.Errorf("Members(%s) accepted %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{`[]`, ` [ ] `, `[] x`, `[`, `[,]`, `[1]`, `[1, "x"]`, `[1,]`, `[1 2]`, `[1]]`, `{}`} {
		want := json.Valid([]byte(in)) && strings.HasPrefix(strings.TrimSpace(in), "[")
		if got := Elements([]byte(in), func([]byte) error { return nil }) == nil; got != want {
			t.Errorf("Elements(%s) accepted %v, want %v", in, got, want)
		}
	}
}

func TestStringTextAndAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\tnew\nline\r", `q"b\s/`, "\x00\x01\x1f", "é ☃ 😀", "<&>"} {
		quoted := AppendString(nil, s)
		var viaJSON string
		if err := json.Unmarshal(quoted, &viaJSON); err != nil || viaJSON != s {
			t.Errorf("AppendString(%q) = %s, which reads back as %q (%v)", s, quoted, viaJSON, err)
		}
		got, ok := StringText(quoted)
		if !ok || got != s {
			t.Errorf("StringText(%s) = %q %v", quoted, got, ok)
		}
	}
	if _, ok := StringText([]byte(`"\ud800"`)); ok {
		t.Error("a lone surrogate was read back")
	}
}

// FuzzWhole: Whole accepts exactly the JSON texts encoding/json accepts
// whose strings are valid UTF-8 without lone surrogates (which a decoder
// would change rather than read).
func FuzzWhole(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `"a"`, `1.5e-3`, `-0`, `{"a":[true,false,null]}`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `01`, `1.`, ` [ 1 , 2 ] `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lone := false
		err := Whole([]byte(in), func(tok String) error {
			if tok.Escaped {
				if _, ok := Unquote(nil, tok.Body); !ok {
					lone = true
				}
			}
			return nil
		})
		valid := json.Valid([]byte(in)) && utf8.ValidString(in) && strings.Count(in, "[")+strings.Count(in, "{") <= MaxDepth
		if err == nil && !json.Valid([]byte(in)) {
			t.Fatalf("Whole accepted %q, which is not JSON", in)
		}
		if valid && err != nil && !lone {
			t.Fatalf("Whole refused %q: %v", in, err)
		}
	})
}

// Walking an object allocates nothing: each key is handed as a slice of
// the message, and a switch on string(key) copies nothing.
func TestMembersAllocatesNothing(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	var seen int
	allocs := testing.AllocsPerRun(100, func() {
		_ = Members(msg, func(key, _, _ []byte) error {
			switch string(key) {
			case "method", "params":
				seen++
			}
			return nil
		})
	})
	if allocs != 0 || seen == 0 {
		t.Errorf("Members allocated %.0f times a walk (saw %d keys); want none", allocs, seen)
	}
}

// Members and Elements hold the whole container to MaxDepth, the
// container's own level included, as the SDK's decoder holds a message:
// a member one level short of the bound passes, one at it does not (issue
// 25: the hub forwarded a message its own client then refused).
func TestContainersHoldTheirItemsToMaxDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	noop := func(_, _, _ []byte) error { return nil }
	if err := Members([]byte(`{"a":`+nest(MaxDepth-1)+`}`), noop); err != nil {
		t.Errorf("an object %d deep refused: %v", MaxDepth, err)
	}
	if err := Members([]byte(`{"a":`+nest(MaxDepth)+`}`), noop); err == nil {
		t.Errorf("an object %d deep taken", MaxDepth+1)
	}
	if err := Elements([]byte(`[`+nest(MaxDepth-1)+`]`), func([]byte) error { return nil }); err != nil {
		t.Errorf("an array %d deep refused: %v", MaxDepth, err)
	}
	if err := Elements([]byte(`[`+nest(MaxDepth)+`]`), func([]byte) error { return nil }); err == nil {
		t.Errorf("an array %d deep taken", MaxDepth+1)
	}
}
