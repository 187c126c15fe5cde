package state

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// OUT-3: error text within the bound travels whole; past it, its head is
// kept, ended on a whole line where one ends near the bound (else on a
// whole character), and a last line says how many bytes were left out.
func TestClipDiagnostic(t *testing.T) {
	if s := strings.Repeat("x", DiagnosticBytes); ClipDiagnostic(s) != s {
		t.Fatal("text at the bound was changed")
	}
	for _, c := range []struct {
		name, text string
		lineEnd    bool
	}{
		{"one long line", strings.Repeat("é", DiagnosticBytes), false},
		{"many lines", strings.Repeat("a line of an error\n", 10000), true},
	} {
		got := ClipDiagnostic(c.text)
		head, marker, ok := strings.Cut(got, "\n[… ")
		if c.lineEnd {
			i := strings.LastIndex(got, "\n[… ")
			head, marker, ok = got[:i], got[i+len("\n[… "):], true
		}
		if !ok || len(got) > DiagnosticBytes || !utf8.ValidString(got) || !strings.HasPrefix(c.text, head) || len(head) < DiagnosticBytes*3/4 {
			t.Fatalf("%s: %d bytes, head %d bytes, a prefix %v", c.name, len(got), len(head), strings.HasPrefix(c.text, head))
		}
		if want := fmt.Sprintf("%d more bytes of this error left out]", len(c.text)-len(head)); marker != want {
			t.Fatalf("%s: marker %q, want %q", c.name, marker, want)
		}
		if c.lineEnd && !strings.HasSuffix(head, "a line of an error") {
			t.Fatalf("%s: the head ends mid-line: %q", c.name, head[len(head)-20:])
		}
	}
}
