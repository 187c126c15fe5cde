package sanitize

import "strings"

// ctlFirst marks the bytes at which a control character may start: C0 other
// than \t \n \r, DEL, and 0xC2, the lead byte of U+0080–U+00BF (which holds
// the C1 range).
var ctlFirst = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t['\t'], t['\n'], t['\r'] = false, false, false
	t[0x7f] = true
	t[0xc2] = true
	return t
}()

const esc = 0x1b

// isC1 reports whether s[i:] starts with a C1 control (U+0080–U+009F),
// which UTF-8 encodes as 0xC2 followed by 0x80–0x9F.
func isC1(s string, i int) bool {
	return s[i] == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads 8 bytes of s from i, little-endian. The compiler merges
// the byte loads into one.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// mayHoldControl reports whether the 8 bytes in x may hold a byte below
// 0x20, DEL or 0xC2. It is exact for "none": the classic has-zero-byte
// test, (v - 0x01..) &^ v & 0x80.., applied to x (for bytes < 0x20, after
// subtracting 0x20) and to x xor 0x7f.. and x xor 0xc2...
func mayHoldControl(x uint64) bool {
	lt20 := (x - 0x20*lsb) &^ x
	del := x ^ 0x7f*lsb
	del = (del - lsb) &^ del
	c2 := x ^ 0xc2*lsb
	c2 = (c2 - lsb) &^ c2
	return (lt20|del|c2)&msb != 0
}

// firstControl returns the index of the first control character to strip,
// or -1. It tests 8 bytes at a time, so clean text costs a few operations
// per word; only words that may hold one (most often just a newline) are
// looked at byte by byte.
func firstControl(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !mayHoldControl(load64(s, i)) {
			continue
		}
		for j := i; j < i+8; j++ {
			if ctlFirst[s[j]] && (s[j] != 0xc2 || isC1(s, j)) {
				return j
			}
		}
	}
	for ; i < len(s); i++ {
		if ctlFirst[s[i]] && (s[i] != 0xc2 || isC1(s, i)) {
			return i
		}
	}
	return -1
}

// stripString strips control characters from s, which need not be valid
// UTF-8 (it is used on configured secrets).
func stripString(s string) string {
	if i := firstControl(s); i >= 0 {
		return stripFrom(s, i)
	}
	return s
}

// stripFrom returns s without its control characters and escape sequences;
// first is the index of the first one, found by firstControl. Clean runs
// between them are found by firstControl too, 8 bytes at a time, and
// copied whole.
func stripFrom(s string, first int) string {
	var b strings.Builder
	b.Grow(len(s))
	kept := 0 // s[kept:i] is clean text not yet written
	for i := first; ; {
		b.WriteString(s[kept:i])
		i = skipControl(s, i)
		kept = i
		j := firstControl(s[i:])
		if j < 0 {
			break
		}
		i += j
	}
	b.WriteString(s[kept:])
	return b.String()
}

// skipControl returns the index just past the control character or escape
// sequence that starts at s[i].
func skipControl(s string, i int) int {
	var intro byte // the escape's type: '[' for CSI, ']' for OSC, ...
	var next int   // index after the introducer
	switch {
	case s[i] == esc:
		if i+1 >= len(s) {
			return i + 1
		}
		c := s[i+1]
		switch {
		case c == '[' || c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
			intro, next = c, i+2
		case c >= 0x20 && c <= 0x2f:
			// nF escape (e.g. ESC ( B, select character set):
			// intermediate bytes, then one final byte.
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
				j++
			}
			if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
				j++
			}
			return j
		case c >= 0x30 && c <= 0x7e:
			// Two-byte escape such as ESC 7 or ESC c.
			return i + 2
		default:
			return i + 1
		}
	case isC1(s, i):
		// The 8-bit forms of the same introducers are C1 controls.
		switch s[i+1] {
		case 0x9b:
			intro = '['
		case 0x9d:
			intro = ']'
		case 0x90:
			intro = 'P'
		case 0x98:
			intro = 'X'
		case 0x9e:
			intro = '^'
		case 0x9f:
			intro = '_'
		default:
			return i + 2
		}
		next = i + 2
	default:
		return i + 1
	}
	if intro == '[' {
		return skipCSI(s, next)
	}
	return skipString(s, next)
}

// skipCSI skips a control sequence's parameter, intermediate and final
// bytes. A malformed sequence ends at the first byte that does not fit, and
// that byte is kept: it is more likely text than part of the sequence.
func skipCSI(s string, j int) int {
	for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
		j++
	}
	for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
		j++
	}
	if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
		j++
	}
	return j
}

// skipString skips the payload of an OSC, DCS, SOS, PM or APC command and
// its terminator (BEL, ESC \ or ST). A terminal would swallow the payload
// until any control character, and so does this, except when the payload
// runs into a line end or the end of the text: then it was most likely
// never meant as an escape, and only the introducer is dropped so that no
// ordinary text is lost.
func skipString(s string, j int) int {
	start := j
	for j < len(s) {
		c := s[j]
		switch {
		case c == 0x07:
			return j + 1
		case c == esc:
			if j+1 < len(s) && s[j+1] == '\\' {
				return j + 2
			}
			return j // the ESC starts the next sequence
		case c == 0xc2 && isC1(s, j):
			if s[j+1] == 0x9c {
				return j + 2
			}
			return j
		case c == '\n' || c == '\r':
			return start
		case c < 0x20 && c != '\t' || c == 0x7f:
			return j
		}
		j++
	}
	return start
}
