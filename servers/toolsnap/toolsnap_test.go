package toolsnap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRulesCatchEachViolation(t *testing.T) {
	bad := &mcp.Tool{
		Name:        "BadName",
		Description: "short",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
	}
	got := strings.Join(Rules(bad), "\n")
	for _, want := range []string{"snake_case", "description", "unknown arguments", "argument x has no description", "no hints", "no delivers"} {
		if !strings.Contains(got, want) {
			t.Errorf("Rules missed %q; said:\n%s", want, got)
		}
	}
	good := &mcp.Tool{
		Name:        "good_tool",
		Description: "A tool described well enough for a model.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","description":"x"}}}`),
		Meta:        mcp.Meta{"crewlet/hints": map[string]string{}, "crewlet/delivers": ""},
	}
	if v := Rules(good); len(v) != 0 {
		t.Errorf("good tool flagged: %v", v)
	}
}

// Issue 29: Unportable reports each spelling the MCP Inspector's --strict
// check reports, where it sits, and leaves alone the booleans JSON Schema
// spells as such (additionalProperties) and the {} of a false schema.
func TestUnportableFindsWhatTheInspectorReports(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		want         []string // one substring a finding, in order; none for a portable schema
	}{
		{"type array", `{"type":"object","properties":{"a":{"type":["null","string"]}}}`,
			[]string{"properties.a: type is an array"}},
		{"bare true", `{"type":"array","items":true}`, []string{"items: a bare true"}},
		{"bare false", `{"type":"object","properties":{"gone":false}}`, []string{"properties.gone: a bare false"}},
		{"untyped", `{"type":"object","properties":{"v":{"description":"anything"}}}`,
			[]string{"properties.v: no keyword constrains"}},
		{"untyped root", `{}`, []string{"(root): no keyword constrains"}},
		{"if alone", `{"if":{"type":"string"}}`, []string{"(root): no keyword constrains"}},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, []string{"$ref \"https://example.com/s.json\""}},
		{"deep", `{"type":"object","properties":{"o":{"anyOf":[{"type":"array","items":{"type":"object","additionalProperties":{"type":["null","integer"]}}},{"type":"null"}]}}}`,
			[]string{"properties.o.anyOf[0].items.additionalProperties: type is an array"}},
		{"portable", `{"type":"object","additionalProperties":false,"properties":{
			"m":{"type":"object","additionalProperties":true},
			"n":{"not":{}},
			"c":{"if":{"type":"string"},"then":{"minLength":1}},
			"r":{"$ref":"#/$defs/x"},
			"a":{"anyOf":[{"type":"string"},{"type":"null"}],"description":"a"}},
			"$defs":{"x":{"type":"string"}}}`, nil},
	} {
		got := Unportable(json.RawMessage(c.schema))
		if len(got) != len(c.want) {
			t.Errorf("%s: %d findings, want %d: %q", c.name, len(got), len(c.want), got)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: finding %q, want it to say %q", c.name, got[i], w)
			}
		}
	}
	tool := &mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"x":{"type":["null","string"],"description":"x"}}}`)}
	if got := strings.Join(Rules(tool), "\n"); !strings.Contains(got, "input schema is not portable: properties.x: type is an array") {
		t.Errorf("Rules let an unportable schema through: %s", got)
	}
}
