package servers

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crewlet/hub/authority"
)

type argsIn struct {
	Title  string   `json:"title"`
	Labels []string `json:"labels,omitempty"`
	Nested *struct {
		Text string `json:"text"`
	} `json:"nested,omitempty"`
}

// argsSchema is argsIn's schema, resolved as the kit resolves a tool's.
func argsSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	schema, err := jsonschema.For[argsIn](nil)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return resolved
}

// OUT-1/OUT-2 on the way in: a control character in any string argument
// is refused invalid, naming the argument and where the character is, so
// nothing unreadable is ever stored; tabs and line breaks pass.
func TestControlCharactersRefusedOnTheWayIn(t *testing.T) {
	resolved := argsSchema(t)
	for _, tc := range []struct {
		args string
		arg  string // "" for accepted
	}{
		{`{"title":"tab\tand\nlines\r\n"}`, ""},
		{`{"title":"caf\u00e9 \u2028 ok"}`, ""},
		{`{"title":"nul\u0000here"}`, "title"},
		{`{"title":"bell\u0007"}`, "title"},
		{`{"title":"esc\u001b[31m"}`, "title"},
		{`{"title":"del\u007f"}`, "title"},
		{`{"title":"c1\u0085"}`, "title"},
		{`{"title":"ok","labels":["fine","bad\u0001"]}`, "labels[1]"},
		{`{"title":"ok","nested":{"text":"\u0000"}}`, "nested.text"},
	} {
		var in argsIn
		r := decodeArgs(json.RawMessage(tc.args), resolved, declaresDefaults(resolved.Schema()), &in)
		switch {
		case tc.arg == "" && r != nil:
			t.Errorf("%s refused: %s", tc.args, r.Sentence)
		case tc.arg != "" && (r == nil || r.Class != authority.Invalid || r.Data["argument"] != tc.arg || !strings.Contains(r.Sentence, tc.arg)):
			t.Errorf("%s: %+v, want invalid naming %s", tc.args, r, tc.arg)
		}
	}
}

// Arguments decode to the same value whether the checked value is written
// out and read again (a schema with defaults to fill in) or not.
func TestArgumentsDecodeTheSameWithoutDefaults(t *testing.T) {
	resolved := argsSchema(t)
	if declaresDefaults(resolved.Schema()) {
		t.Fatal("a schema without defaults is read as declaring some")
	}
	for _, args := range []string{`{"title":"t"}`, `{"title":"t","labels":["a","b"],"nested":{"text":"x"}}`, `{}`, ``, `null`} {
		var direct, roundTrip argsIn
		r1 := decodeArgs(json.RawMessage(args), resolved, false, &direct)
		r2 := decodeArgs(json.RawMessage(args), resolved, true, &roundTrip)
		if (r1 == nil) != (r2 == nil) || !reflect.DeepEqual(direct, roundTrip) {
			t.Errorf("%s: direct %+v %v, round trip %+v %v", args, direct, r1, roundTrip, r2)
		}
	}
	withDefault := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"n": {Type: "integer", Default: json.RawMessage(`3`)}}}
	if !declaresDefaults(withDefault) {
		t.Fatal("a default was not seen")
	}
}

// The same rule for arguments the kit does not decode (a third-party
// tool's, checked by the hub before forwarding): every way JSON can carry a
// control character is caught, and text without one passes.
func TestCheckArgumentTextCatchesEveryEncoding(t *testing.T) {
	for _, raw := range []string{
		`{"a":"x\u0000y"}`, `{"a":"\u001B[31m"}`, `{"a":["ok","\b"]}`, `{"n":{"deep":"\f"}}`,
		"{\"a\":\"x\x7fy\"}", "{\"a\":\"x\u0085y\"}", `{"a":"\u007f"}`, `{"a":"\u009F"}`,
		// Both ends of the C1 range written as such.
		"{\"a\":\"x\u0080y\"}", "{\"a\":\"x\u009fy\"}",
	} {
		r := CheckArgumentText(json.RawMessage(raw))
		if r == nil || r.Class != authority.Invalid {
			t.Errorf("%q passed: %v", raw, r)
		}
	}
	for _, raw := range []string{`{"a":"tab\tline\nbreak\r","b":"caf\u00e9 \\b \\u0000"}`, `not json`, ``, `{"a":"é"}`, "{\"a\":\"no\u00a0break\"}",
		// Not JSON, and cut inside a character: its server's business,
		// and never read past its end.
		"{\"a\":\"x\xc2"} {
		if r := CheckArgumentText(json.RawMessage(raw)); r != nil {
			t.Errorf("%q refused: %s", raw, r.Sentence)
		}
	}
	r := CheckArgumentText(json.RawMessage(`{"path":"ok","query":{"q":"a\u0000"}}`))
	if r == nil || !strings.Contains(r.Sentence, "query.q") {
		t.Fatalf("the argument is not named: %v", r)
	}
}

// A list's page size: the default when none is sent, the caller's inside
// the range, and a refusal naming the argument and the range outside it.
func TestPageLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, want int
		refused     bool
	}{
		{0, 50, false}, {1, 1, false}, {200, 200, false}, {37, 37, false},
		{-1, 0, true}, {201, 0, true}, {-200, 0, true},
	} {
		got, err := PageLimit(tc.limit, 50, 200)
		if tc.refused {
			var r *authority.Refusal
			if !errors.As(err, &r) || r.Class != authority.Invalid || r.Data["argument"] != "limit" ||
				r.Sentence != fmt.Sprintf("limit %d is outside 1 to 200.", tc.limit) {
				t.Errorf("limit %d: %v, want an invalid refusal naming limit and 1 to 200", tc.limit, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("limit %d = %d, %v; want %d", tc.limit, got, err, tc.want)
		}
	}
}

// Arguments that are not an object are refused invalid in encoding/json's
// words, which never quote the arguments back (the fast decoder's would).
func TestArgumentsNotAnObjectRefused(t *testing.T) {
	resolved := argsSchema(t)
	for args, kind := range map[string]string{`["sekrit-value"]`: "array", `"sekrit-value"`: "string", `42`: "number"} {
		var in argsIn
		r := decodeArgs(json.RawMessage(args), resolved, false, &in)
		want := "The arguments must be a JSON object: json: cannot unmarshal " + kind + " into Go value of type map[string]interface {}."
		if r == nil || r.Class != authority.Invalid || r.Sentence != want {
			t.Errorf("%s: %+v, want %q", args, r, want)
		}
	}
}
