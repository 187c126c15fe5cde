package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

// The report is the last message's text, its parts joined, read from the
// event stream whole however the stream is cut into writes — not from the
// clipped transcript.
func TestCLIReportIsTheLastMessagesText(t *testing.T) {
	r := &eventReader{text: opencodeText}
	stream := `{"type":"step_start","part":{"messageID":"m1"}}
{"type":"text","part":{"messageID":"m1","text":"Looking at it."}}
{"type":"tool_use","part":{"messageID":"m1","tool":"bash"}}
not json at all
{"type":"text","part":{"messageID":"m2","text":"Done."}}
{"type":"text","part":{"messageID":"m2","text":"` + strings.Repeat("x", 300<<10) + `"}}
{"type":"step_finish","part":{"messageID":"m2"}}
`
	for i := 0; i < len(stream); i += 7 {
		r.Write([]byte(stream[i:min(i+7, len(stream))]))
	}
	if got := r.report(); got != "Done.\n"+strings.Repeat("x", 300<<10) {
		t.Fatalf("report %d bytes: %.40q", len(got), got)
	}
	if r.count != 7 || r.tooLong != 0 {
		t.Fatalf("count %d, too long %d", r.count, r.tooLong)
	}
}

// A line past 32 MiB is not read, only measured; the lines around it are.
func TestCLILinePast32MiBIsMeasuredNotRead(t *testing.T) {
	r := &eventReader{text: opencodeText}
	r.Write([]byte(`{"type":"text","part":{"messageID":"m1","text":"before"}}` + "\n"))
	long := bytes.Repeat([]byte("y"), 1<<20)
	for i := 0; i < 33; i++ {
		r.Write(long)
	}
	r.Write([]byte("\n"))
	if r.tooLong != 33<<20 || len(r.line) != 0 {
		t.Fatalf("too long %d, held %d", r.tooLong, len(r.line))
	}
	if r.report() != "before" {
		t.Fatalf("report %q", r.report())
	}
}
