package sanitize

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResultWith hands the rewrite exactly the structured strings it changed,
// as they were and as sanitised, and keeps what the rewrite answers.
func TestResultWithRewritesChangedStrings(t *testing.T) {
	s := New("s3cr3t-value")
	var seen [][2]string
	rewrite := func(raw, clean string) string {
		seen = append(seen, [2]string{raw, clean})
		return "<" + clean + ">"
	}
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "bell\x07"}},
		StructuredContent: map[string]any{"a": "bell\x07", "b": "plain", "c": []any{"has s3cr3t-value in it"}},
	}
	out, err := s.ResultWith(res, rewrite)
	if err != nil {
		t.Fatal(err)
	}
	m := out.StructuredContent.(map[string]any)
	if m["a"] != "<bell>" || m["b"] != "plain" {
		t.Fatalf("structured %v", m)
	}
	if c := m["c"].([]any)[0].(string); c[0] != '<' || len(seen) != 2 {
		t.Fatalf("rewrite saw %v; c = %q", seen, c)
	}
	// Text content is not structured content: sanitised, not rewritten.
	if got := out.Content[0].(*mcp.TextContent).Text; got != "bell" {
		t.Fatalf("text content %q", got)
	}
}
