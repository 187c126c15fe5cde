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

// BenchmarkTextHostile measures OUT-1's promise that no input makes
// sanitising slow: every scan is linear, so each kind of hostile text runs
// at about the same MB/s at 128 KiB as at 1 MiB, where a quadratic scan
// would slow down eightfold. Compare the two sizes of one kind:
//
//	go test ./hub/sanitize -run '^$' -bench TextHostile
//
// It is a benchmark, not a test, because a ratio of times measured on a
// shared machine is not something a test can assert without either
// flaking or forgiving a real regression.
func BenchmarkTextHostile(b *testing.B) {
	units := []struct{ name, unit string }{
		{"chained-slack-prefixes", "xoxb-"},
		{"chained-keys", "token="},
		{"chained-headers", "authorization:"},
		{"quotes", `"`},
		{"colons", ":"},
		{"begin-lines-without-end", "-----BEGIN RSA PRIVATE KEY-----\n"},
		{"many-jwt-starts", "eyJaaaa."},
		{"bearer-words", "bearer "},
		{"open-osc-strings", "\x1b]"},
		{"repeated-secret", "a"},
	}
	s := New("aaaaaaaaaaaaaaaa")
	for _, u := range units {
		for _, size := range []int{128 << 10, 1 << 20} {
			in := strings.Repeat(u.unit, size/len(u.unit))
			b.Run(fmt.Sprintf("%s/%dKiB", u.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					if _, err := s.Text(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
