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
// a description, an object input schema that refuses unknown arguments, and
// hints and delivers stated in _meta.
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
	if _, ok := tool.Meta["crewlet/hints"]; !ok {
		add("no hints in _meta")
	}
	if _, ok := tool.Meta["crewlet/delivers"]; !ok {
		add("no delivers in _meta")
	}
	return bad
}
