package sandbox

import (
	"fmt"
	"strings"
	"testing"
)

// OUT-2's shape of a transcript: whole lines from the start up to the
// head's size, whole lines from the end up to the tail's, the middle
// counted exactly, a line longer than the tail counted and never cut, and
// an unended last line kept as a line.
func TestTranscriptKeepsWholeLinesHeadAndTail(t *testing.T) {
	tr := newTranscript(20, 30)
	var all strings.Builder
	write := func(s string) {
		all.WriteString(s)
		// in pieces, as a pipe hands them over
		for len(s) > 0 {
			n := min(3, len(s))
			tr.Write([]byte(s[:n]))
			s = s[n:]
		}
	}
	for i := 1; i <= 9; i++ {
		write(fmt.Sprintf("line %d\n", i)) // 7 bytes each
	}
	write(strings.Repeat("x", 40) + "\n") // longer than the tail
	write("line 10\nline 11\nend")
	tr.finish()
	// head: lines 1-2 (14 bytes; a third would pass 20). The tail keeps
	// what fits in 30 bytes from the end: "line 10\nline 11\nend" (19),
	// the 41-byte line never fits, so lines 3-9 and it are the middle.
	wantHead := "line 1\nline 2\n"
	wantTail := "line 10\nline 11\nend"
	if tr.midLines != 8 || tr.midBytes != 7*7+41 {
		t.Fatalf("middle %d lines %d bytes", tr.midLines, tr.midBytes)
	}
	want := wantHead + "[... 8 lines (90 bytes) of the middle left out ...]\n" + wantTail
	if got := tr.String(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if int64(len(wantHead)+len(wantTail))+tr.midBytes != int64(all.Len()) {
		t.Fatal("kept and left out do not add up to what was written")
	}
}

// A short stream is kept whole, with no marker.
func TestTranscriptShortStreamWhole(t *testing.T) {
	tr := newTranscript(TranscriptHead, TranscriptTail)
	tr.Write([]byte("one\ntwo"))
	tr.finish()
	if tr.String() != "one\ntwo" || tr.midLines != 0 {
		t.Fatalf("%q", tr.String())
	}
}

// The error stream keeps its last bytes and says the size of its unread
// start.
func TestStderrTailSaysItsUnreadStart(t *testing.T) {
	tb := &tailBuffer{max: 10}
	tb.Write([]byte("0123456789"))
	tb.Write([]byte("abcdef"))
	if got, want := tb.String(), "[... the first 6 bytes left out ...]\n6789abcdef"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
