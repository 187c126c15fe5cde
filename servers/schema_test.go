package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/toolsnap"
)

// shapesIn holds every shape a tool's argument struct has: the ones the
// inference writes as a type array (pointers, slices, maps) or as a bare
// true (any), nested in each other, beside plain fields that stay as they
// are.
type shapesIn struct {
	Name     string            `json:"name" jsonschema:"a plain string"`
	Title    *string           `json:"title,omitempty" jsonschema:"a pointer: null clears it"`
	By       *float64          `json:"by,omitempty" jsonschema:"a pointer to a number"`
	Small    *int8             `json:"small,omitempty" jsonschema:"a bounded integer behind a pointer"`
	Labels   []string          `json:"labels,omitempty" jsonschema:"a slice"`
	Values   []any             `json:"values,omitempty" jsonschema:"a slice of anything"`
	Value    any               `json:"value,omitempty" jsonschema:"anything"`
	Data     map[string]any    `json:"data,omitempty" jsonschema:"a free-form object"`
	Files    map[string]*shape `json:"files,omitempty" jsonschema:"a map of pointers"`
	Items    []shape           `json:"items,omitempty" jsonschema:"a slice of structs"`
	Nested   *shape            `json:"nested,omitempty" jsonschema:"a pointer to a struct"`
	Pair     [2]int            `json:"pair,omitempty" jsonschema:"an array of fixed length"`
	Required []string          `json:"required_list" jsonschema:"a slice that must be sent"`
}

type shape struct {
	Kind  string   `json:"kind" jsonschema:"what it is"`
	OneOf []any    `json:"one_of,omitempty" jsonschema:"values it may hold"`
	Min   *float64 `json:"min,omitempty" jsonschema:"least"`
}

// Issue 29: a typed tool's advertised input schema passes the MCP
// Inspector's --strict check (as toolsnap.Unportable applies it): a
// pointer, slice or map field is anyOf its type and null, an any field is
// anyOf every JSON type, the field's description beside the anyOf. The
// inferred schema, which the kit checks arguments against, is left as it
// was, so a tool's refusals keep their words.
func TestAdvertisedSchemaIsPortable(t *testing.T) {
	inferred, err := jsonschema.For[shapesIn](nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(inferred)
	if len(toolsnap.Unportable(inferred)) == 0 {
		t.Fatal("the inferred schema is already portable: this test no longer covers what the kit rewrites")
	}
	got := portableSchema(inferred)
	if after, _ := json.Marshal(inferred); string(after) != string(before) {
		t.Fatalf("rewriting changed the inferred schema it copied:\nbefore %s\nafter  %s", before, after)
	}
	if bad := toolsnap.Unportable(got); len(bad) > 0 {
		t.Fatalf("the advertised schema is not portable:\n%s", strings.Join(bad, "\n"))
	}

	var props map[string]json.RawMessage
	b, _ := json.Marshal(got.Properties)
	if err := json.Unmarshal(b, &props); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"name":   `{"description":"a plain string","type":"string"}`,
		"title":  `{"anyOf":[{"type":"string"},{"type":"null"}],"description":"a pointer: null clears it"}`,
		"small":  `{"anyOf":[{"maximum":127,"minimum":-128,"type":"integer"},{"type":"null"}],"description":"a bounded integer behind a pointer"}`,
		"labels": `{"anyOf":[{"items":{"type":"string"},"type":"array"},{"type":"null"}],"description":"a slice"}`,
		"value":  `{"anyOf":[{"type":"null"},{"type":"boolean"},{"type":"number"},{"type":"string"},{"type":"array"},{"type":"object"}],"description":"anything"}`,
		"data":   `{"additionalProperties":true,"description":"a free-form object","type":"object"}`,
		"files":  `{"additionalProperties":{"anyOf":[{"additionalProperties":false,"properties":{"kind":{"description":"what it is","type":"string"},"min":{"anyOf":[{"type":"number"},{"type":"null"}],"description":"least"},"one_of":{"anyOf":[{"items":{"anyOf":[{"type":"null"},{"type":"boolean"},{"type":"number"},{"type":"string"},{"type":"array"},{"type":"object"}]},"type":"array"},{"type":"null"}],"description":"values it may hold"}},"required":["kind"],"type":"object"},{"type":"null"}]},"description":"a map of pointers","type":"object"}`,
		"pair":   `{"description":"an array of fixed length","items":{"type":"integer"},"maxItems":2,"minItems":2,"type":"array"}`,
	} {
		if canonical(t, props[name]) != canonical(t, []byte(want)) {
			t.Errorf("%s is advertised as\n %s\nwant\n %s", name, props[name], want)
		}
	}
	if strings.Join(got.Required, ",") != "name,required_list" || got.Type != "object" {
		t.Errorf("the root changed: type %q required %v", got.Type, got.Required)
	}
	if b, _ := json.Marshal(got.AdditionalProperties); string(b) != "false" {
		t.Errorf("the root accepts unknown arguments: additionalProperties %s", b)
	}
}

// Issue 29: the advertised schema accepts exactly what the inferred one
// does: every argument of shapesIn, and values nested in its structs, set
// to each kind of JSON value (and to bounds the inference put on them),
// gets the same verdict from both.
func TestAdvertisedSchemaAcceptsWhatTheInferredOneDoes(t *testing.T) {
	inferred, err := jsonschema.For[shapesIn](nil)
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(s *jsonschema.Schema) *jsonschema.Resolved {
		r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	was, now := resolve(inferred), resolve(portableSchema(inferred))

	values := []string{`null`, `true`, `0`, `1.5`, `-129`, `127`, `"s"`, `[]`, `["s"]`, `[1,"s",null,{}]`, `[1,2]`, `[1,2,3]`,
		`{}`, `{"a":1}`, `{"kind":"k"}`, `{"kind":"k","min":null,"one_of":[1,"a",[],{}]}`, `{"kind":1}`,
		`{"kind":"k","extra":1}`, `{"kind":"k","min":"1"}`, `{"kind":"k","one_of":"x"}`, `{"x":{"kind":"k"}}`,
		`{"x":null}`, `{"x":{"kind":"k","min":2}}`, `{"x":{"min":2}}`, `[{"kind":"k"}]`, `[{"kind":"k","one_of":null}]`,
		`[{"kind":2}]`, `[null]`}
	fields := []string{"name", "title", "by", "small", "labels", "values", "value", "data", "files", "items", "nested",
		"pair", "required_list", "unknown"}
	base := func() map[string]any { return map[string]any{"name": "n", "required_list": []any{}} }
	var checked, accepted int
	for _, f := range fields {
		for _, v := range values {
			args := base()
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				t.Fatal(err)
			}
			args[f] = x
			wasErr, nowErr := was.Validate(args), now.Validate(args)
			if (wasErr == nil) != (nowErr == nil) {
				t.Errorf("%s = %s: inferred says %v, advertised says %v", f, v, wasErr, nowErr)
			}
			checked++
			if wasErr == nil {
				accepted++
			}
		}
	}
	for _, missing := range []string{"name", "required_list"} {
		args := base()
		delete(args, missing)
		if was.Validate(args) == nil || now.Validate(args) == nil {
			t.Errorf("without %s: inferred %v, advertised %v, want both refused", missing, was.Validate(args), now.Validate(args))
		}
	}
	// Both verdicts must occur, or the comparison proves nothing.
	if accepted == 0 || accepted == checked {
		t.Fatalf("%d of %d argument sets accepted: the corpus does not tell the schemas apart", accepted, checked)
	}
}

// Issue 29: through the kit, a tool lists the portable schema and still
// refuses in the inferred schema's words: a wrong type on a nullable
// argument names the types wanted in one line, and null is still taken.
func TestTypedToolListsPortableRefusesAsInferred(t *testing.T) {
	tool := Typed("shapes", "Take every shape of argument.", Hints{ReadOnly: Yes, OpenWorld: No}, "",
		func(_ context.Context, _ authority.Caller, in shapesIn) (map[string]any, error) {
			return map[string]any{"title_null": in.Title == nil, "labels": len(in.Labels)}, nil
		})
	trust, proof := InProcessTrust()
	s := mcp.NewServer(&mcp.Implementation{Name: "kit-test", Version: "0"}, nil)
	Register(s, trust, nil, tool)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })

	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(lt.Tools) != 1 {
		t.Fatalf("list: %v %v", lt, err)
	}
	if bad := toolsnap.Unportable(lt.Tools[0].InputSchema); len(bad) > 0 {
		t.Fatalf("listed schema is not portable:\n%s", strings.Join(bad, "\n"))
	}
	callShapes := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "shapes", Arguments: json.RawMessage(args),
			Meta: CallerMeta(ada, proof)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := callShapes(`{"name":"n","required_list":[],"title":null,"labels":null}`)
	if res.IsError || !strings.Contains(firstText(res), `"title_null":true`) {
		t.Fatalf("null on nullable arguments: %s", firstText(res))
	}
	res = callShapes(`{"name":"n","required_list":[],"labels":"x"}`)
	msg := firstText(res)
	if !res.IsError || !strings.Contains(msg, `want one of "null, array"`) || strings.Contains(msg, "anyOf") {
		t.Fatalf("a string for labels answered %s, want a refusal naming the types wanted", msg)
	}
	if n := strings.Count(msg, "\n"); n > 0 {
		t.Errorf("the refusal runs to %d lines: %s", n+1, msg)
	}
}

// canonical is JSON re-marshalled with its keys sorted.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// firstText is a result's first text content.
func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprint(res.Content[0])
}
