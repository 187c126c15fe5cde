package hub

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzActBody holds the /operator/act body parser to its contract whatever
// arrives: it never panics; what it takes names a tool of printable text
// within its bound and arguments that are one JSON object; and what it
// takes, written back, is taken again as the same call. Its seeds run as a
// plain test.
func FuzzActBody(f *testing.F) {
	for _, seed := range []string{
		`{"tool":"list_projects"}`,
		`{"tool":"create_work_item","arguments":{"title":"Ship it"}}`,
		`{"tool":"create_work_item","arguments":null}`,
		`{"tool":"x","arguments":[]}`,
		`{"tool":"x","arguments":"text"}`,
		`{"tool":"","arguments":{}}`,
		`{"tool":"x","args":{}}`,
		`{"tool":"x"} {"tool":"y"}`,
		`{"tool":"x\u0000y"}`,
		`{"tool":7}`,
		`[{"tool":"x"}]`,
		`{"tool":"x","arguments":{"op_id":"op_1"}}`,
		// Written back, & is escaped as \u0026: the same call in other bytes.
		`{"tool":"x","arguments":{"a&b":"<c>"}}`,
		` {"tool" : "x" , "arguments" : { } } `,
		`null`,
		``,
		`{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body, err := parseActBody(raw)
		if err != nil {
			if body.Tool != "" || body.Arguments != nil {
				t.Fatalf("a refused body answered a call: %+v", body)
			}
			return
		}
		switch {
		case body.Tool == "" || len(body.Tool) > maxActToolName || !utf8.ValidString(body.Tool) || strings.ContainsFunc(body.Tool, isControl):
			t.Fatalf("took tool %q", body.Tool)
		case !json.Valid(body.Arguments) || body.Arguments[0] != '{':
			t.Fatalf("took arguments %q", body.Arguments)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body.Arguments, &obj); err != nil {
			t.Fatalf("arguments %q are no object: %v", body.Arguments, err)
		}
		again, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseActBody(again)
		if err != nil || back.Tool != body.Tool || !sameJSON(back.Arguments, body.Arguments) {
			t.Fatalf("%q written back as %q is taken as %+v (%v)", raw, again, back, err)
		}
	})
}

// sameJSON reports whether two JSON texts hold the same value: the same
// call, whatever escapes or spacing each was written with.
func sameJSON(a, b []byte) bool {
	decode := func(b []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v)
	}
	va, erra := decode(a)
	vb, errb := decode(b)
	return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
}
