package upstream

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxStderrLine is the most of one stderr line the hub keeps. A server
// that writes a megabyte on one line (a dumped payload, a minified stack)
// must not cost the hub that much per log event, nor stop the hub reading:
// a reader that gives up closes the pipe, and the child's next write then
// fails with EPIPE, which kills Go and Node servers outright.
const maxStderrLine = 8 << 10

// stderrChunk is how much is read from the pipe at a time.
const stderrChunk = 32 << 10

// readLines reads r until it ends, in chunks of bounded size, and hands
// emit every line without its line ending. A line longer than limit is
// cut after at most limit bytes (on a character boundary) and says how
// many bytes it left out (OUT-2): the reading itself never stops early,
// whatever the child writes.
func readLines(r io.Reader, limit int, emit func(string)) {
	buf := make([]byte, stderrChunk)
	line := make([]byte, 0, min(limit, stderrChunk))
	dropped := 0 // bytes of the current line past limit
	flush := func() {
		emit(finishLine(line, dropped))
		line, dropped = line[:0], 0
	}
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			part := chunk
			if i >= 0 {
				part = chunk[:i]
			}
			room := max(limit-len(line), 0)
			if len(part) <= room {
				line = append(line, part...)
			} else {
				line = append(line, part[:room]...)
				dropped += len(part) - room
			}
			if i < 0 {
				break
			}
			flush()
			chunk = chunk[i+1:]
		}
		if err != nil {
			// A last line without its newline still counts.
			if len(line) > 0 || dropped > 0 {
				flush()
			}
			return
		}
	}
}

// finishLine renders a line read by readLines: a whole line loses a
// trailing carriage return; a cut one keeps whole characters only and says
// how much of it was left out.
func finishLine(line []byte, dropped int) string {
	if dropped == 0 {
		return string(bytes.TrimSuffix(line, []byte{'\r'}))
	}
	// The cut may fall inside a multi-byte character: its first bytes go
	// with the part left out rather than end the kept part in half a
	// character.
	keep := len(line)
	for back := 1; back <= utf8.UTFMax && back <= len(line); back++ {
		if utf8.RuneStart(line[len(line)-back]) {
			if !utf8.FullRune(line[len(line)-back:]) {
				keep = len(line) - back
			}
			break
		}
	}
	dropped += len(line) - keep
	return fmt.Sprintf("%s … [this line went on for %d more bytes, not kept]", line[:keep], dropped)
}
