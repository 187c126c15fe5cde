package sanitize

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Redacted is what every redacted secret is replaced by.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest configured secret value that is redacted.
// Shorter values are ignored because they are likely to be ordinary words or
// numbers, and redacting every "admin" or "1234" would damage output far
// more than it protects.
const MinSecretLen = 8

// maxPasses bounds how often redaction is re-run on its own output.
// Redacting one thing can expose another: a token glued to a configured
// secret ("...s3cretbearer abc...") fails the word-boundary test until the
// secret has become "[REDACTED]". Re-running until nothing changes is what
// makes Text idempotent. Real text settles in one pass, and the second
// only confirms it; the bound guards against inputs built to chain.
const maxPasses = 4

// ErrBinary is matched (errors.Is) by every error that rejects binary data
// found in a text field.
var ErrBinary = errors.New("binary data in text")

// BinaryError reports text that holds bytes which are not text. Its message
// is a full sentence meant to be shown to a model as the reason a tool result
// was refused.
type BinaryError struct {
	// Where names the field, e.g. "text content item 2"; empty for Text.
	Where string
	// Of names what held the field: "the tool's result" when empty, or a
	// message a server sent while serving a call.
	Of string
	// Reason says what was found: "invalid UTF-8" or "a NUL byte".
	Reason string
	// Offset is the byte offset of the first offending byte in that field.
	Offset int
}

func (e *BinaryError) Error() string {
	subject := "the text held binary data"
	if e.Where != "" {
		of := e.Of
		if of == "" {
			of = "the tool's result"
		}
		subject = of + " held binary data in " + e.Where
	}
	return fmt.Sprintf("%s (%s at byte %d); binary data must be sent as image, audio or blob resource content",
		subject, e.Reason, e.Offset)
}

// Unwrap lets callers test for ErrBinary without knowing the field.
func (e *BinaryError) Unwrap() error { return ErrBinary }

// Sanitizer strips control characters, redacts secrets and rejects binary
// data in tool output. It is safe for concurrent use. The zero value works
// and has no configured secrets.
type Sanitizer struct {
	// secrets is swapped as a whole on SetSecrets so that a call in flight
	// sees one consistent set without taking a lock on the hot path.
	secrets atomic.Pointer[secretSet]
}

// secretSet is an immutable, search-ready form of the configured secret
// values.
type secretSet struct {
	// Values up to maxAnchored bytes are found through their rarest byte,
	// grouped so that one IndexByte pass serves every value with the same
	// rare byte. Longer ones (PEM keys, say) go to strings.Index, whose
	// Rabin-Karp fallback keeps long needles linear.
	anchors []anchorGroup
	long    []string
}

// maxAnchored bounds the values found by anchor byte: each hit costs a
// comparison of up to this many bytes.
const maxAnchored = 64

type anchorGroup struct {
	b              byte
	minOff, maxOff int // range of offsets of b in the values
	values         []anchored
}

// anchored is a secret value whose byte at off is its group's anchor.
type anchored struct {
	v   string
	off int
}

// byteRank estimates how common byte c is in tool output (prose, logs,
// JSON, code); lower is rarer. Searching for a value's rarest byte rather
// than its first makes IndexByte skip most of the text at vector speed:
// a value starting with 'e' would otherwise stop the search everywhere.
func byteRank(c byte) int {
	switch {
	case c == ' ' || strings.IndexByte("etaoinsrhl", c) >= 0:
		return 9
	case 'a' <= c && c <= 'z':
		return 7
	case strings.IndexByte("\n\t.,:;\"'=-_/()0123", c) >= 0:
		return 5
	case '4' <= c && c <= '9', c >= 0x80:
		return 4
	case 'A' <= c && c <= 'Z':
		return 3
	default:
		return 1
	}
}

func newSecretSet(values []string) *secretSet {
	set := &secretSet{}
	groups := map[byte]*anchorGroup{}
	for _, v := range values {
		if len(v) > maxAnchored {
			set.long = append(set.long, v)
			continue
		}
		off := 0
		for i := range len(v) {
			if byteRank(v[i]) < byteRank(v[off]) {
				off = i
			}
		}
		g := groups[v[off]]
		if g == nil {
			g = &anchorGroup{b: v[off], minOff: off, maxOff: off}
			groups[v[off]] = g
		}
		g.minOff, g.maxOff = min(g.minOff, off), max(g.maxOff, off)
		g.values = append(g.values, anchored{v, off})
	}
	for _, g := range groups {
		set.anchors = append(set.anchors, *g)
	}
	slices.SortFunc(set.anchors, func(a, b anchorGroup) int { return int(a.b) - int(b.b) })
	return set
}

// New returns a Sanitizer that redacts the given secret values in addition
// to the built-in credential shapes. See SetSecrets for which values count.
func New(secrets ...string) *Sanitizer {
	s := &Sanitizer{}
	s.SetSecrets(secrets)
	return s
}

// SetSecrets replaces the configured secret values, e.g. after the hub
// reloads its configuration or its secret store. Values shorter than
// MinSecretLen bytes are ignored. Each value is also redacted where it
// appears base64-encoded from its first byte (see base64Forms). It is safe to call while other goroutines
// use the Sanitizer; calls already running finish with the previous set.
func (s *Sanitizer) SetSecrets(secrets []string) {
	var values []string
	for _, v := range secrets {
		// Text is searched after control characters are stripped, so a
		// secret holding any can only ever match in its stripped form.
		v = stripString(v)
		if len(v) < MinSecretLen {
			continue
		}
		// A value that is part of the marker itself would match inside
		// every earlier redaction and grow the text on each pass; it
		// cannot be protected in a meaningful way, so it is left out.
		if strings.Contains(Redacted, v) {
			continue
		}
		values = append(values, v)
		values = append(values, base64Forms(v)...)
	}
	slices.Sort(values)
	s.secrets.Store(newSecretSet(slices.Compact(values)))
}

// base64Forms are how a secret reads base64-encoded (standard and URL
// alphabets), as a server that prints a Basic credential or an encoded
// config does: the whole 4-character groups that encode it, which read the
// same whatever follows the secret in the encoded text. A secret encoded
// from an offset not a multiple of 3 reads otherwise and is not found.
func base64Forms(v string) []string {
	n := len(v) / 3 * 4
	std := base64.StdEncoding.EncodeToString([]byte(v))[:n]
	url := base64.URLEncoding.EncodeToString([]byte(v))[:n]
	if url == std {
		return []string{std}
	}
	return []string{std, url}
}

// noSecrets stands in for the set of a Sanitizer that was never given one.
var noSecrets = newSecretSet(nil)

func (s *Sanitizer) loadSecrets() *secretSet {
	if set := s.secrets.Load(); set != nil {
		return set
	}
	return noSecrets
}

// Text strips control characters from in and redacts secrets in it. It
// returns an error, and no text, if in holds invalid UTF-8 or a NUL byte:
// such bytes are binary data, and repairing them would hand the caller
// something the tool never said. The output is never truncated. When
// nothing needs changing, in itself is returned without copying.
func (s *Sanitizer) Text(in string) (string, error) {
	out, berr := s.text(in, s.loadSecrets())
	if berr != nil {
		return "", berr // not returned when nil: a nil *BinaryError is a non-nil error
	}
	return out, nil
}

// text is Text with a given secret set (Result uses one set throughout) and
// a concrete error type, so callers can fill in where the text was.
func (s *Sanitizer) text(in string, set *secretSet) (string, *BinaryError) {
	ctl, binary := precheck(in)
	if binary {
		off, reason, _ := findBinary(in)
		return "", &BinaryError{Reason: reason, Offset: off}
	}
	out := in
	if ctl >= 0 {
		out = stripFrom(in, ctl)
	}
	for range maxPasses {
		next, changed := redact(out, set)
		if !changed {
			break
		}
		out = next
	}
	return out, nil
}

// precheck reports whether s is binary (holds a NUL or invalid UTF-8) and,
// if not, where its first control character is (-1 for none). It reads s
// once, in chunks small enough to stay in cache for all three checks.
func precheck(s string) (firstCtl int, binary bool) {
	firstCtl = -1
	for lo := 0; lo < len(s); {
		hi := min(lo+chunkSize, len(s))
		// End the chunk on a rune boundary, so that valid text is
		// valid chunk by chunk and no C1 pair is split.
		for n := 1; n < utf8.UTFMax && hi < len(s) && !utf8.RuneStart(s[hi]); n++ {
			hi++
		}
		c := s[lo:hi]
		if strings.IndexByte(c, 0) >= 0 || !utf8.ValidString(c) {
			return -1, true
		}
		if firstCtl < 0 {
			if j := firstControl(c); j >= 0 {
				firstCtl = lo + j
			}
		}
		lo = hi
	}
	return firstCtl, false
}

// Reasons a text is binary, as BinaryError.Reason.
const (
	reasonNUL     = "a NUL byte"
	reasonInvalid = "invalid UTF-8"
)

// findBinary reports the first byte of in that shows it is not text: a NUL
// or the start of an invalid UTF-8 sequence.
func findBinary(in string) (offset int, reason string, bad bool) {
	nul := strings.IndexByte(in, 0)
	valid := utf8.ValidString(in)
	if nul < 0 && valid {
		return 0, "", false
	}
	if !valid {
		// The walk stops at the first invalid sequence, so a NUL before
		// it is still reported first.
		for i := 0; i < len(in); {
			if in[i] == 0 {
				return i, reasonNUL, true
			}
			r, size := utf8.DecodeRuneInString(in[i:])
			if r == utf8.RuneError && size == 1 {
				return i, reasonInvalid, true
			}
			i += size
		}
	}
	return nul, reasonNUL, true
}
