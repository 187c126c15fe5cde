package sandbox

import (
	"bytes"
	"fmt"
)

// The shapes a run's streams are kept in: the transcript's whole lines
// from its start and its end with its middle counted (the plan opens it,
// and a crash explains itself at the bottom), and the error stream's end.
const (
	TranscriptHead = 64 << 10
	TranscriptTail = 192 << 10
	StderrTail     = 2 << 20
	// MaxLine is the longest report, question or result line read back
	// from a box; past it the line is refused, said by its size, never
	// cut (a half line would be a lasting half-fact).
	MaxLine = 32 << 20
)

// transcript keeps a stream's first head bytes and last tail bytes of
// whole lines and counts the lines and bytes between them. A line is
// never cut: one that does not fit what is left of the head starts the
// tail, and one longer than the whole tail is counted in the middle.
type transcript struct {
	head, tail  int
	headBuf     []byte
	headDone    bool
	tailBuf     []byte // whole lines, oldest first
	partial     []byte // the line being written, not yet ended
	partialLost int64  // bytes of the partial line already counted out
	midLines    int64
	midBytes    int64
	cut         int64 // bytes of a last line the stream was stopped inside
	total       int64
}

func newTranscript(head, tail int) *transcript { return &transcript{head: head, tail: tail} }

func (t *transcript) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			t.addPartial(rest)
			break
		}
		t.addPartial(rest[:i+1])
		t.endLine()
		rest = rest[i+1:]
	}
	return len(p), nil
}

// addPartial grows the line being written; a line already longer than the
// whole tail can never be kept, so its bytes are counted and let go.
func (t *transcript) addPartial(p []byte) {
	if t.partialLost > 0 {
		t.partialLost += int64(len(p))
		return
	}
	if len(t.partial)+len(p) > t.tail && (t.headDone || len(t.headBuf)+len(t.partial)+len(p) > t.head) {
		t.partialLost = int64(len(t.partial) + len(p))
		t.partial = nil
		return
	}
	t.partial = append(t.partial, p...)
}

// endLine files the finished line in the head while it fits there, then
// in the tail, letting the tail's oldest lines go into the middle.
func (t *transcript) endLine() {
	if t.partialLost > 0 {
		// The tail is the stream's end, unbroken: what it held came
		// before the line let go, so it goes to the middle too.
		t.headDone = true
		t.midLines += int64(bytes.Count(t.tailBuf, []byte{'\n'})) + 1
		t.midBytes += int64(len(t.tailBuf)) + t.partialLost
		t.tailBuf = t.tailBuf[:0]
		t.partialLost = 0
		return
	}
	line := t.partial
	t.partial = nil
	if !t.headDone && len(t.headBuf)+len(line) <= t.head {
		t.headBuf = append(t.headBuf, line...)
		return
	}
	t.headDone = true
	t.tailBuf = append(t.tailBuf, line...)
	for len(t.tailBuf) > t.tail {
		i := bytes.IndexByte(t.tailBuf, '\n')
		t.midLines++
		t.midBytes += int64(i + 1)
		t.tailBuf = t.tailBuf[i+1:]
	}
}

// finish files an unended last line as a line of its own.
func (t *transcript) finish() {
	if len(t.partial) > 0 || t.partialLost > 0 {
		t.endLine()
	}
}

// dropPartial leaves out the line being written: the stream was cut
// inside it, and half a line is not kept as a line. It is said after the
// tail, where it was.
func (t *transcript) dropPartial() {
	t.cut += int64(len(t.partial)) + t.partialLost
	t.partial, t.partialLost = nil, 0
}

// leftOut is what the transcript does not show: lines and bytes.
func (t *transcript) leftOut() (lines, bytes int64) {
	lines, bytes = t.midLines, t.midBytes+t.cut
	if t.cut > 0 {
		lines++
	}
	return lines, bytes
}

// String is the head, a line saying what of the middle was left out, and
// the tail.
func (t *transcript) String() string {
	s := string(t.headBuf)
	if t.midLines > 0 {
		s += fmt.Sprintf("[... %d lines (%d bytes) of the middle left out ...]\n", t.midLines, t.midBytes)
	}
	s += string(t.tailBuf)
	if t.cut > 0 {
		s += fmt.Sprintf("\n[... the stream was stopped inside its last line; its %d bytes are left out ...]\n", t.cut)
	}
	return s
}

// tailBuffer keeps a stream's last max bytes and counts the ones before.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		t.dropped += int64(len(p) - t.max)
		p = p[len(p)-t.max:]
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is the kept end, after a line saying the unread start's size.
func (t *tailBuffer) String() string {
	if t.dropped == 0 {
		return string(t.buf)
	}
	return fmt.Sprintf("[... the first %d bytes left out ...]\n%s", t.dropped, t.buf)
}
