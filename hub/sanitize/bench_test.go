package sanitize

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeatTo5MiB repeats unit to 5 MiB.
func repeatTo5MiB(unit string) string {
	return strings.Repeat(unit, 5<<20/len(unit)+1)[:5<<20]
}

// BenchmarkText5MiB measures OUT-1's common path: 5 MiB of text with
// nothing to strip or redact, which must come back uncopied and without
// allocating. The kinds of text differ in how often they hold the bytes
// that can start a credential (':' and '=' in JSON and logs). "dirty"
// measures the copying path: an escape sequence at the start and a secret
// at the end.
func BenchmarkText5MiB(b *testing.B) {
	secrets := make([]string, 16)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("configured-secret-%02d", i)
	}
	mixed := fiveMiB()
	cases := []struct {
		name string
		s    *Sanitizer
		in   string
	}{
		{"mixed", New(), mixed},
		{"mixed/16-secrets", New(secrets...), mixed},
		{"prose", New(), repeatTo5MiB("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.\n")},
		{"log", New(), repeatTo5MiB("2024-05-01T12:00:00Z INFO served path=/api/v1/items status=200 duration=12ms user=alice\n")},
		{"json", New(), repeatTo5MiB(`{"id": 12345, "name": "widget", "tags": ["a", "b"], "price": 9.99, "created_at": "2024-01-01T00:00:00Z"},` + "\n")},
		{"dirty", New(secrets...), "\x1b[1m" + mixed + " configured-secret-07"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.in)))
			b.ReportAllocs()
			for b.Loop() {
				out, err := tc.s.Text(tc.in)
				if err != nil || len(out) < len(tc.in)-64 {
					b.Fatalf("Text: %d bytes, %v", len(out), err)
				}
			}
		})
	}
}

// BenchmarkResult measures a typical small result: a few text items and
// typed structured content that needs no change.
func BenchmarkResult(b *testing.B) {
	type row struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	rows := make([]row, 50)
	for i := range rows {
		rows[i] = row{i, fmt.Sprintf("item %d", i)}
	}
	r := &mcp.CallToolResult{
		Content: []mcp.Content{
			&mcp.TextContent{Text: strings.Repeat("some ordinary tool output\n", 40)},
			&mcp.TextContent{Text: "done"},
		},
		StructuredContent: map[string]any{"rows": rows},
	}
	s := New("configured-secret-value")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Result(r); err != nil {
			b.Fatal(err)
		}
	}
}
