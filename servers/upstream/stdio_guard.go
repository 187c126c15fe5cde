package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/crewlet/hub/servers/rawjson"
)

// stdioGuard reads a stdio child's output for the SDK's reader, a line at
// a time. A line that answers a call of the hub's (its id says so) with
// JSON nested past the SDK's bound, or with a line that is not JSON, would
// end the SDK's session as a broken connection and the child with it; it
// goes to the call, refused as unreadable, instead.
// Everything else reaches the SDK as the server wrote it.
type stdioGuard struct {
	src     *bufio.Reader
	pending []byte // what the SDK has yet to read of the current line
	line    []byte // a line longer than the reader's buffer, gathered
	refuse  func(id string, err error) bool
}

func newStdioGuard(src io.Reader, refuse func(string, error) bool) *stdioGuard {
	return &stdioGuard{src: bufio.NewReaderSize(src, 64<<10), refuse: refuse}
}

func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.next()
		if len(line) > 0 && !g.take(line) {
			g.pending = line
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// next is the next line, its newline included. A line whose message is
// past maxMessage is read to its end, no more of it kept than the bound,
// and is never handed to the SDK when it answers a call of the hub's: the
// SDK would refuse it as a broken connection and end the session, and the
// child with it, though the child answered and is fine. The line is whole
// and the next one begins after it, so nothing is out of step: the call is
// refused as the server's unreadable answer, past the bound (issue 25
// defect 5), and the session lives on. Any other line past the bound (a
// notification, a request, an answer to the SDK's own request, which waits
// for it) is handed on, cut at the bound, for the SDK to refuse as it
// always has.
func (g *stdioGuard) next() ([]byte, error) {
	chunk, err := g.src.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return chunk, err
	}
	g.line = append(g.line[:0], chunk...)
	// Room for a message of maxMessage bytes and its line's end.
	for errors.Is(err, bufio.ErrBufferFull) && len(g.line) < maxMessage+2 {
		chunk, err = g.src.ReadSlice('\n')
		g.line = append(g.line, chunk...)
	}
	if !errors.Is(err, bufio.ErrBufferFull) && len(bytes.TrimRight(g.line, "\r\n")) <= maxMessage {
		return g.line, err
	}
	var top topMembers
	top.feed(g.line)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = g.src.ReadSlice('\n')
		top.feed(chunk)
	}
	if id, ok := top.callAnswered(); ok {
		// Kept from the SDK even where the call is no longer waiting
		// (it was cancelled): the SDK's session made no such request.
		g.refuse(id, &UnreadableError{Why: tooLarge})
		return nil, err
	}
	return g.line, err
}

// take hands a call's answer that the SDK cannot read (nested past its
// bound, or not JSON) to the call, refused; false for any other line.
func (g *stdioGuard) take(line []byte) bool {
	if !bytes.Contains(line, []byte(`"`+callPrefix)) {
		return false
	}
	var why string
	if levels := depth(line); levels > rawjson.MaxDepth {
		why = nestedWhy(levels)
	} else if bytes.HasSuffix(line, []byte("\n")) && !json.Valid(line) {
		// The SDK's decoder, which reads a stream and not lines, would
		// fail on it and end the session, or read on into the next line.
		// A line the output ended in the middle of is not one: the child
		// exited mid-answer, and the session ends as it should.
		why = notJSON
	} else {
		return false
	}
	// The id is read by the scan, which keeps no stack and reads a line
	// that is not JSON as far as it goes: encoding/json gives up past
	// 10,000 levels, and a line it could not read went to the SDK, which
	// ended the child's session over it (issue 36).
	var top topMembers
	top.feed(line)
	id, ok := top.callAnswered()
	if !ok {
		return false
	}
	// Kept from the SDK even where the call is no longer waiting (it was
	// cancelled): the SDK's session made no such request.
	g.refuse(id, &UnreadableError{Why: why})
	return true
}

// notJSON is why a stdio answer that does not parse is refused.
const notJSON = "a line that is not well-formed JSON"

// topMembers reads, from a message fed to it in pieces, as much of its
// top level as tells a call's answer: a string id and whether it has a
// method (a request's). It keeps no more of the message than those.
type topMembers struct {
	depth             int
	object            bool // the message is an object
	wantKey           bool // the next string at the top level is a key
	inString, escaped bool
	str               []byte // the top-level string being read, as written
	keep              bool   // str is a key, or the value of id, and is kept
	isKey             bool
	key               string // the last key read
	id                []byte // the string id, as written
	method            bool
}

// A key the scan looks for, or an id the hub wrote, is short: a longer
// string is not one.
const topStringMax = 256

func (t *topMembers) feed(b []byte) {
	for _, c := range b {
		if t.inString {
			switch {
			case t.escaped:
				t.escaped = false
			case c == '\\':
				t.escaped = true
			case c == '"':
				t.inString = false
				t.endString()
				continue
			}
			if t.keep && len(t.str) < topStringMax {
				t.str = append(t.str, c)
			}
			continue
		}
		switch c {
		case '"':
			t.inString = true
			t.isKey = t.depth == 1 && t.object && t.wantKey
			t.keep = t.depth == 1 && t.object && (t.isKey || t.key == "id")
			t.str = append(t.str[:0], '"')
			if t.isKey {
				t.wantKey = false
			}
		case '{', '[':
			if t.depth == 0 && c == '{' {
				t.object, t.wantKey = true, true
			}
			t.depth++
		case '}', ']':
			t.depth--
		case ',':
			if t.depth == 1 && t.object {
				t.wantKey = true
			}
		}
	}
}

func (t *topMembers) endString() {
	if !t.keep || len(t.str) >= topStringMax {
		return
	}
	var s string
	if json.Unmarshal(append(t.str, '"'), &s) != nil {
		return
	}
	switch {
	case t.isKey:
		t.key = s
		t.method = t.method || s == "method"
	case t.key == "id":
		t.id = append(t.id[:0], s...)
	}
}

// callAnswered is the id of the hub's call the message answers; false for
// any other message.
func (t *topMembers) callAnswered() (string, bool) {
	id := string(t.id)
	return id, !t.method && strings.HasPrefix(id, callPrefix)
}
