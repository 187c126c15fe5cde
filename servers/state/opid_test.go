package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{}`},
		{`null`, `{}`},
		{` {} `, `{}`},
		{`{"b":1,"a":{"d":[1, 2.50,"x"],"c":true}}`, `{"a":{"c":true,"d":[1,2.50,"x"]},"b":1}`},
		{`{"html":"<a&b>"}`, `{"html":"<a&b>"}`},
		{`{"u":"\u00e9"}`, `{"u":"é"}`},
	} {
		got, err := Canonical(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := Canonical(json.RawMessage(`{"a":1} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}

func TestOpID(t *testing.T) {
	args := json.RawMessage(`{"title":"Ship it","labels":["a","b"]}`)
	before := time.Now().Add(-time.Millisecond)
	id := NewOpID("create_work_item", args)
	if !strings.HasPrefix(string(id), "op_") || !id.Valid() {
		t.Fatalf("id %q", id)
	}
	if parsed, err := ParseOpID(string(id)); err != nil || parsed != id {
		t.Fatalf("ParseOpID: %v", err)
	}
	if m := id.Minted(); m.Before(before) || m.After(time.Now().Add(time.Millisecond)) {
		t.Fatalf("minted %v", m)
	}
	if NewOpID("create_work_item", args) == id {
		t.Fatal("two fresh ids are equal")
	}
	for _, tc := range []struct {
		tool, args string
		want       bool
	}{
		{"create_work_item", `{"labels":["a","b"],"title":"Ship it"}`, true},
		{"create_work_item", "{\n  \"title\": \"Ship it\",\n  \"labels\": [\"a\", \"b\"]\n}", true},
		{"create_work_item", `{"title":"Ship it!","labels":["a","b"]}`, false},
		{"create_work_item", `{"title":"Ship it","labels":["b","a"]}`, false},
		{"update_work_item", `{"title":"Ship it","labels":["a","b"]}`, false},
		{"create_work_item", `{"title":"Ship it"}`, false},
	} {
		if got := id.Matches(tc.tool, json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("Matches(%s, %s) = %v", tc.tool, tc.args, got)
		}
	}
	// A tool name cannot be spliced into the arguments.
	if NewOpID("ab", json.RawMessage(`{}`)).Matches("a", json.RawMessage(`b{}`)) {
		t.Error("tool/argument splice matched")
	}
	// Not JSON: still bound to its exact bytes.
	raw := NewOpID("t", json.RawMessage(`not json`))
	if !raw.Matches("t", json.RawMessage(`not json`)) || raw.Matches("t", json.RawMessage(`not  json`)) {
		t.Error("raw arguments")
	}
	for _, bad := range []string{"", "op_", "op_zz." + strings.Repeat("a", 26), "xx_" + string(id)[3:], string(id) + "a", strings.ToUpper(string(id))} {
		if _, err := ParseOpID(bad); err == nil {
			t.Errorf("ParseOpID(%q) accepted", bad)
		}
	}
}

// OPS-5: the tool name is length-prefixed inside the digest, so a tool name
// cannot borrow the start of the arguments: "ar" called with {} and "a"
// called with the raw bytes `j{}` would otherwise digest the same bytes.
func TestOpIDToolNameCannotSpliceIntoArgs(t *testing.T) {
	if NewOpID("ar", json.RawMessage(`{}`)).Matches("a", json.RawMessage(`j{}`)) {
		t.Fatal("an op_id for tool ar with {} matches tool a with j{}")
	}
	if _, err := CheckOpID(string(NewOpID("ar", json.RawMessage(`{}`))), "a", json.RawMessage(`j{}`)); err == nil {
		t.Fatal("CheckOpID accepted an op_id of another tool")
	}
}

// OPS-6: every call under one key's scope shares a stem, and only the
// digest tells the calls apart; another scope is another stem.
func TestKeyedOpID(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	a := KeyedOpID("key/ada/req-1", at, "create_work_item", json.RawMessage(`{"title":"x"}`))
	same := KeyedOpID("key/ada/req-1", at, "create_work_item", json.RawMessage(`{ "title" : "x" }`))
	other := KeyedOpID("key/ada/req-1", at, "create_work_item", json.RawMessage(`{"title":"y"}`))
	elsewhere := KeyedOpID("key/bob/req-1", at, "create_work_item", json.RawMessage(`{"title":"x"}`))
	switch {
	case !a.Valid() || a != same:
		t.Fatalf("the same call under one key: %s, %s", a, same)
	case other == a || other.Stem() != a.Stem():
		t.Fatalf("another call under the key: %s (stem %s), first %s", other, other.Stem(), a)
	case elsewhere.Stem() == a.Stem():
		t.Fatal("another scope shares the stem")
	case !a.Matches("create_work_item", json.RawMessage(`{"title":"x"}`)) || !a.Minted().Equal(at):
		t.Fatalf("%s does not name its call at %v", a, at)
	case OpID("op_nope").Stem() != "":
		t.Fatal("a malformed id has a stem")
	}
}
