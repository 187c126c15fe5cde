// Package toolsnap freezes a server's tool surface in testdata: every tool's
// name, description, input schema, hints and delivers, one JSON file a tool.
// A change to the surface shows in review as a diff of those files; run the
// tests with UPDATE_TOOLSNAPS=1 to accept one.
package toolsnap

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Check compares every listed tool with its snapshot under dir, and fails for
// a snapshot whose tool is gone.
func Check(t *testing.T, dir string, tools []*mcp.Tool) {
	t.Helper()
	update := os.Getenv("UPDATE_TOOLSNAPS") == "1"
	seen := map[string]bool{}
	for _, tool := range tools {
		seen[tool.Name+".json"] = true
		got, err := json.MarshalIndent(tool, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		got = append(got, '\n')
		path := filepath.Join(dir, tool.Name+".json")
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("tool %s has no snapshot (%v); run with UPDATE_TOOLSNAPS=1 to write one", tool.Name, err)
			continue
		}
		if string(want) != string(got) {
			t.Errorf("tool %s differs from %s; run with UPDATE_TOOLSNAPS=1 if the change is meant:\n got: %s\nwant: %s", tool.Name, path, got, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var stale []string
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			stale = append(stale, filepath.Base(f))
		}
	}
	sort.Strings(stale)
	for _, f := range stale {
		if update {
			_ = os.Remove(filepath.Join(dir, f))
		} else {
			t.Errorf("snapshot %s names no listed tool", f)
		}
	}
}

// Rules checks what must hold for every first-party tool: a snake_case name,
// a description, an object input schema that refuses unknown arguments and
// that every client can read (Unportable), and hints and delivers stated in
// _meta.
func Rules(tool *mcp.Tool) []string {
	var bad []string
	add := func(f string, a ...any) { bad = append(bad, tool.Name+": "+fmt.Sprintf(f, a...)) }
	for _, r := range tool.Name {
		if !(r >= 'a' && r <= 'z' || r == '_' || r >= '0' && r <= '9') {
			add("name is not snake_case")
			break
		}
	}
	if len(tool.Description) < 20 {
		add("description is missing or too short to guide a model")
	}
	b, _ := json.Marshal(tool.InputSchema)
	var s struct {
		Type                 string          `json:"type"`
		AdditionalProperties json.RawMessage `json:"additionalProperties"`
		Properties           map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(b, &s)
	if s.Type != "object" {
		add("input schema is not an object")
	}
	if string(s.AdditionalProperties) != "false" {
		add("input schema accepts unknown arguments")
	}
	for name, p := range s.Properties {
		if p.Description == "" {
			add("argument %s has no description", name)
		}
	}
	for _, f := range Unportable(tool.InputSchema) {
		add("input schema is not portable: %s", f)
	}
	if _, ok := tool.Meta["crewlet/hints"]; !ok {
		add("no hints in _meta")
	}
	if _, ok := tool.Meta["crewlet/delivers"]; !ok {
		add("no delivers in _meta")
	}
	return bad
}

// Unportable lists where a JSON Schema is spelled in a way clients that map
// tool schemas onto a single-type dialect (Gemini's function declarations,
// among others) reject or drop, each as "path: what". They are the MCP
// Inspector's --strict findings, errors and warnings alike, so a tool table
// is held to them without Node:
//
//   - a bare true or false where a schema object is expected (a boolean is
//     the ordinary value of additionalProperties and its kin);
//   - type given as an array, ["null","string"], rather than anyOf branches
//     of one type each;
//   - a schema with no keyword a value can fail, which accepts anything
//     as a bare true does (except under not, where {} is false's half);
//   - a $ref outside the document, which no client fetches.
func Unportable(schema any) []string {
	b, err := json.Marshal(schema)
	if err != nil {
		return []string{"the schema does not marshal: " + err.Error()}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return []string{"the schema is not JSON: " + err.Error()}
	}
	var out []string
	lintSchema(v, "", "", &out)
	return out
}

// booleanValued are the keywords whose value is as often a boolean as a
// schema.
var booleanValued = map[string]bool{
	"additionalProperties": true, "unevaluatedProperties": true,
	"additionalItems": true, "unevaluatedItems": true,
}

// constraining are the keywords a value can fail. if asserts nothing
// without then or else, and is checked apart.
var constraining = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`type enum const multipleOf maximum exclusiveMaximum minimum
		exclusiveMinimum maxLength minLength pattern format contentMediaType contentEncoding
		contentSchema maxItems minItems uniqueItems maxContains minContains maxProperties
		minProperties required dependentRequired allOf anyOf oneOf not items prefixItems contains
		additionalItems unevaluatedItems properties patternProperties additionalProperties
		unevaluatedProperties propertyNames dependentSchemas dependencies $ref $dynamicRef
		$recursiveRef`) {
		constraining[k] = true
	}
}

func lintSchema(node any, path, keyword string, out *[]string) {
	at := path
	if at == "" {
		at = "(root)"
	}
	if b, ok := node.(bool); ok {
		if !booleanValued[keyword] {
			*out = append(*out, fmt.Sprintf("%s: a bare %v where a schema object is expected", at, b))
		}
		return
	}
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if types, ok := m["type"].([]any); ok {
		*out = append(*out, fmt.Sprintf("%s: type is an array %v; write anyOf branches of one type each", at, types))
	}
	if ref, ok := m["$ref"].(string); ok && ref != "" && !strings.HasPrefix(ref, "#") {
		*out = append(*out, fmt.Sprintf("%s: $ref %q points outside the document", at, ref))
	}
	constrains := false
	for k := range m {
		if constraining[k] {
			constrains = true
		}
	}
	if _, ok := m["if"]; ok && (m["then"] != nil || m["else"] != nil) {
		constrains = true
	}
	if !constrains && keyword != "not" {
		*out = append(*out, fmt.Sprintf("%s: no keyword constrains the value, so it accepts anything", at))
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions":
			sub, _ := m[k].(map[string]any)
			names := make([]string, 0, len(sub))
			for n := range sub {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				lintSchema(sub[n], join(k+"."+n), k, out)
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			list, _ := m[k].([]any)
			for i, c := range list {
				lintSchema(c, fmt.Sprintf("%s[%d]", join(k), i), k, out)
			}
		case "items":
			if list, ok := m[k].([]any); ok {
				for i, c := range list {
					lintSchema(c, fmt.Sprintf("%s[%d]", join(k), i), k, out)
				}
				continue
			}
			lintSchema(m[k], join(k), k, out)
		case "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
			"unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema":
			lintSchema(m[k], join(k), k, out)
		}
	}
}
