// Package rawjson reads JSON text without decoding it into Go values: the
// structure of a value, its object members and array elements as spans of
// the text, its strings as they are written. The hub's hot path uses it to
// route and sanitise messages it forwards, so that a message is read once
// and written on as it came wherever nothing in it changes.
//
// Everything here is a pure function of its input; nothing is retained.
package rawjson

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is answered for text that is not what the reader accepts:
// malformed JSON, a string that is not valid UTF-8, or nesting deeper than
// MaxDepth.
var ErrSyntax = errors.New("rawjson: not well-formed JSON")

// MaxDepth is the nesting the MCP SDK's own decoder accepts.
const MaxDepth = 1000

// String is a string token: in[Start:End] is the token, quotes included,
// and Body what is between the quotes, as written.
type String struct {
	Start, End int
	Body       []byte
	// Escaped reports escapes in Body: its text must be read with Unquote.
	Escaped bool
	// Key reports an object key.
	Key bool
}

// WS returns the index of the first byte at or after i that is not JSON
// white space.
func WS(in []byte, i int) int {
	for i < len(in) {
		switch in[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Value reads the JSON value starting at in[i] and returns the index after
// it. visit, when not nil, is called with every string token in the value,
// in order, keys included; an error it returns ends the walk.
func Value(in []byte, i int, visit func(String) error) (int, error) {
	r := reader{in: in, visit: visit}
	return r.value(i)
}

// item reads a member or element of a container at raw's top level: one
// level deeper than the container, so the whole of raw is held to
// MaxDepth, as the SDK's decoder holds a message.
func item(raw []byte, i int) (int, error) {
	r := reader{in: raw, depth: 1}
	return r.value(i)
}

// Whole checks that in is one JSON value and nothing else but white space.
func Whole(in []byte, visit func(String) error) error {
	end, err := Value(in, WS(in, 0), visit)
	if err != nil {
		return err
	}
	if WS(in, end) != len(in) {
		return ErrSyntax
	}
	return nil
}

type reader struct {
	in    []byte
	visit func(String) error
	depth int
}

func (r *reader) value(i int) (int, error) {
	if i >= len(r.in) {
		return 0, ErrSyntax
	}
	switch c := r.in[i]; {
	case c == '"':
		return r.str(i, false)
	case c == '{':
		return r.object(i)
	case c == '[':
		return r.array(i)
	case c == 't':
		return r.literal(i, "true")
	case c == 'f':
		return r.literal(i, "false")
	case c == 'n':
		return r.literal(i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return number(r.in, i)
	}
	return 0, ErrSyntax
}

func (r *reader) literal(i int, lit string) (int, error) {
	if len(r.in)-i < len(lit) || string(r.in[i:i+len(lit)]) != lit {
		return 0, ErrSyntax
	}
	return i + len(lit), nil
}

// number checks JSON number syntax: -?int frac? exp?.
func number(in []byte, i int) (int, error) {
	if i < len(in) && in[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case digits() == 0:
		return 0, ErrSyntax
	}
	if i < len(in) && in[i] == '.' {
		i++
		if digits() == 0 {
			return 0, ErrSyntax
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, ErrSyntax
		}
	}
	return i, nil
}

func (r *reader) object(i int) (int, error) {
	if r.depth++; r.depth > MaxDepth {
		return 0, ErrSyntax
	}
	defer func() { r.depth-- }()
	i = WS(r.in, i+1)
	if i < len(r.in) && r.in[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(r.in) || r.in[i] != '"' {
			return 0, ErrSyntax
		}
		var err error
		if i, err = r.str(i, true); err != nil {
			return 0, err
		}
		if i = WS(r.in, i); i >= len(r.in) || r.in[i] != ':' {
			return 0, ErrSyntax
		}
		if i, err = r.value(WS(r.in, i+1)); err != nil {
			return 0, err
		}
		i = WS(r.in, i)
		if i >= len(r.in) {
			return 0, ErrSyntax
		}
		switch r.in[i] {
		case ',':
			i = WS(r.in, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, ErrSyntax
		}
	}
}

func (r *reader) array(i int) (int, error) {
	if r.depth++; r.depth > MaxDepth {
		return 0, ErrSyntax
	}
	defer func() { r.depth-- }()
	i = WS(r.in, i+1)
	if i < len(r.in) && r.in[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = r.value(i); err != nil {
			return 0, err
		}
		i = WS(r.in, i)
		if i >= len(r.in) {
			return 0, ErrSyntax
		}
		switch r.in[i] {
		case ',':
			i = WS(r.in, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, ErrSyntax
		}
	}
}

func (r *reader) str(i int, key bool) (int, error) {
	tok, ok := ScanString(r.in, i)
	if !ok {
		return 0, ErrSyntax
	}
	if r.visit != nil {
		tok.Key = key
		if err := r.visit(tok); err != nil {
			return 0, err
		}
	}
	return tok.End, nil
}

// strSpecial marks the bytes ScanString must look at: the closing quote,
// an escape, a control character and any byte of a multi-byte character.
var strSpecial = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80
	}
	return t
}()

// ScanString reads the string token at in[i], which must be its opening
// quote. ok is false for a token that is not a JSON string of valid UTF-8.
func ScanString(in []byte, i int) (tok String, ok bool) {
	if i >= len(in) || in[i] != '"' {
		return String{}, false
	}
	j := i + 1
	ascii := true
	escaped := false
	for j < len(in) {
		// Plain bytes, nearly all of most strings, in a tight loop.
		for j < len(in) && !strSpecial[in[j]] {
			j++
		}
		if j >= len(in) {
			break
		}
		c := in[j]
		switch {
		case c == '"':
			body := in[i+1 : j]
			if !ascii && !utf8.Valid(body) {
				return String{}, false
			}
			return String{Start: i, End: j + 1, Body: body, Escaped: escaped}, true
		case c == '\\':
			escaped = true
			if j+1 >= len(in) {
				return String{}, false
			}
			switch in[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, ok := hex4(in, j+2); !ok {
					return String{}, false
				}
				j += 6
			default:
				return String{}, false
			}
			continue
		case c < 0x20:
			return String{}, false
		case c >= 0x80:
			ascii = false
		}
		j++
	}
	return String{}, false
}

// Unquote appends the text of a string body with escapes to dst. ok is
// false for a malformed escape or a lone surrogate, which a decoder would
// replace rather than keep.
func Unquote(dst, body []byte) ([]byte, bool) {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return nil, false
		}
		switch body[i+1] {
		case '"', '\\', '/':
			dst = append(dst, body[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(body, i+2)
			if !ok {
				return nil, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
					r2, ok = hex4(body, i+2)
				}
				dec := utf16.DecodeRune(r, r2)
				if !ok || dec == utf8.RuneError {
					return nil, false
				}
				r = dec
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return nil, false
		}
		i += 2
	}
	return dst, true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// AppendString appends s, UTF-8 text, as a JSON string. Quotes, backslashes
// and control characters are escaped; everything else is kept as it is
// (no HTML escaping: the text is data, not a page).
func AppendString[T string | []byte](dst []byte, s T) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Members calls fn with each member of the JSON object raw (the whole of
// raw, white space aside): its key, its key token as written, and its
// value's text, each a slice of raw (so nothing is allocated per member;
// `switch string(key)` compares without a copy). A key written with
// escapes is refused (ErrSyntax): no message this package is used on
// spells its keys so. An error fn returns ends the walk and is answered.
func Members(raw []byte, fn func(key, keyRaw, val []byte) error) error {
	i, empty, err := openContainer(raw, '{', '}')
	if err != nil || empty {
		return err
	}
	for {
		tok, ok := ScanString(raw, i)
		if !ok || tok.Escaped {
			return ErrSyntax
		}
		if i = WS(raw, tok.End); i >= len(raw) || raw[i] != ':' {
			return ErrSyntax
		}
		start := WS(raw, i+1)
		stop, err := item(raw, start)
		if err != nil {
			return err
		}
		if err := fn(tok.Body, raw[tok.Start:tok.End], raw[start:stop]); err != nil {
			return err
		}
		var done bool
		if i, done, err = afterItem(raw, stop, '}'); err != nil || done {
			return err
		}
	}
}

// Elements calls fn with the text of each element of the JSON array raw
// (the whole of raw, white space aside).
func Elements(raw []byte, fn func(val []byte) error) error {
	i, empty, err := openContainer(raw, '[', ']')
	if err != nil || empty {
		return err
	}
	for {
		stop, err := item(raw, i)
		if err != nil {
			return err
		}
		if err := fn(raw[i:stop]); err != nil {
			return err
		}
		var done bool
		if i, done, err = afterItem(raw, stop, ']'); err != nil || done {
			return err
		}
	}
}

// openContainer reads the opening bracket of the object or array that is
// the whole of raw: where its first member or element starts, or that it
// is empty.
func openContainer(raw []byte, opening, closing byte) (i int, empty bool, err error) {
	i = WS(raw, 0)
	if i >= len(raw) || raw[i] != opening {
		return 0, false, ErrSyntax
	}
	i = WS(raw, i+1)
	if i < len(raw) && raw[i] == closing {
		return 0, true, closesRaw(raw, i)
	}
	return i, false, nil
}

// afterItem reads what follows a member or element ending at stop: a
// comma and where the next one starts, or the closing bracket, which must
// end raw.
func afterItem(raw []byte, stop int, closing byte) (i int, done bool, err error) {
	i = WS(raw, stop)
	switch {
	case i >= len(raw):
		return 0, false, ErrSyntax
	case raw[i] == ',':
		return WS(raw, i+1), false, nil
	case raw[i] == closing:
		return 0, true, closesRaw(raw, i)
	}
	return 0, false, ErrSyntax
}

// closesRaw checks that the closing bracket at i is the last thing in raw.
func closesRaw(raw []byte, i int) error {
	if WS(raw, i+1) != len(raw) {
		return ErrSyntax
	}
	return nil
}

// StringText returns the text of a JSON string value (raw is the whole
// token, quotes included), decoding escapes. ok is false for anything that
// is not a string, or one a decoder would not read back exactly.
func StringText(raw []byte) (string, bool) {
	tok, ok := ScanString(raw, WS(raw, 0))
	if !ok || WS(raw, tok.End) != len(raw) {
		return "", false
	}
	if !tok.Escaped {
		return string(tok.Body), true
	}
	b, ok := Unquote(nil, tok.Body)
	return string(b), ok
}
