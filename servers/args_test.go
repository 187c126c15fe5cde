package servers

import (
	"encoding/json"
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

// OUT-1/OUT-2 on the way in: a control character in any string argument
// is refused invalid, naming the argument and where the character is, so
// nothing unreadable is ever stored; tabs and line breaks pass.
func TestControlCharactersRefusedOnTheWayIn(t *testing.T) {
	schema, err := jsonschema.For[argsIn](nil)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
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
		r := decodeArgs(json.RawMessage(tc.args), resolved, &in)
		switch {
		case tc.arg == "" && r != nil:
			t.Errorf("%s refused: %s", tc.args, r.Sentence)
		case tc.arg != "" && (r == nil || r.Class != authority.Invalid || r.Data["argument"] != tc.arg || !strings.Contains(r.Sentence, tc.arg)):
			t.Errorf("%s: %+v, want invalid naming %s", tc.args, r, tc.arg)
		}
	}
}
