package sanitize

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/crewlet/hub/servers/rawjson"
)

// The one walk. Everything the hub passes on from a server (a tool's
// result, a notification, a request, a listing) is sanitised as JSON text,
// in one pass, never decoded into Go values: every string in it, object
// keys included, goes through the rules of Text, and the text is copied
// only from the first string that changed. A value that needs no change
// costs one scan and no allocation.
//
// The walk reads what a go-sdk client reads from the same bytes, and
// refuses what it cannot read (ErrMalformed): a string that is not UTF-8
// reads with U+FFFD in place of each bad byte, as encoding/json reads it;
// nesting past the SDK's bound is refused. Where the hub itself made the
// JSON from Go values (the typed entry points: Result, ReadResource ...),
// such a string is binary data in a Go string and is refused as Text
// refuses it, never repaired: encoding/json writes each bad byte as the
// escape \ufffd, which it never writes for the rune itself.

// ErrMalformed is matched (errors.Is) by the error for a result or message
// that a go-sdk client could not decode: not JSON, a member of the wrong
// type, a content type the SDK refuses, nesting past its bound. The server
// answered, with something no client can read: retrying will not help.
var ErrMalformed = errors.New("the server's answer is not one an MCP client can read")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

var errSyntax = malformed("it is not well-formed JSON")

// maxDepth is the nesting the SDK's decoder accepts, counted from the
// outermost object of a result or message.
const maxDepth = rawjson.MaxDepth

// walker sanitises one result or message under one secret set, so a
// concurrent SetSecrets cannot leave it half redacted under each.
type walker struct {
	s   *Sanitizer
	set *secretSet
	// foreign: what is walked came from a third-party server, whose
	// _meta keys are renamed where they would read as the hub's.
	foreign bool
	// typed: the JSON was marshalled here from Go values (see above).
	typed bool
	// rewrite is applied to each string of the free value being walked
	// that the rules changed; nil: none.
	rewrite Rewrite
	// check: only read the JSON as a client would, applying no rule: the
	// second look an error takes to tell a malformed answer from one the
	// rules refuse.
	check   bool
	scratch []byte // decoded strings with escapes
}

func (s *Sanitizer) newWalker(foreign, typed bool) *walker {
	return &walker{s: s, set: s.loadSecrets(), foreign: foreign, typed: typed}
}

// ruleError is a rule's refusal found during the walk: binary data, two
// keys that became one, content the hub cannot check. Where it was is
// gathered as the error returns through the walk, so the path costs
// nothing until something is refused.
type ruleError struct {
	kind   ruleKind
	reason string // binary: what was found
	offset int    // binary: where in the string
	key    bool   // binary: the string was an object key
	name   string // collision: the key; uncheckable: the content's Go type
	item   int    // uncheckable: the content item
	path   []pathElem
	// where names the field, "{}" standing for what holds it (see frame).
	where string
}

type ruleKind uint8

const (
	ruleBinary ruleKind = iota
	ruleCollision
	ruleUncheckable
)

func (e *ruleError) Error() string { return e.public().Error() }

// pathElem is one step into a JSON value: an object key or, when isIdx is
// set, an array index.
type pathElem struct {
	key   string
	index int
	isIdx bool
}

// frame names what holds the field the error is in: where's "{}" becomes
// holder, which may hold a "{}" of its own for the next frame out.
func frame(err error, holder string) error {
	if e, ok := err.(*ruleError); ok && holder != "" {
		if e.where == "" {
			e.where = "{}"
		}
		e.where = strings.Replace(e.where, "{}", holder, 1)
	}
	return err
}

// public is the error a caller is given: a sentence a model can read.
func (e *ruleError) public() error {
	where := strings.Replace(e.where, "{}", "", 1)
	at := where
	if len(e.path) > 0 {
		at += " at " + formatPath(e.path)
	}
	switch e.kind {
	case ruleCollision:
		return fmt.Errorf("the tool's result held two keys in %s that are the same once control characters and secrets are removed (%s), so the result cannot be passed on whole",
			at, strconv.Quote(e.name))
	case ruleUncheckable:
		return fmt.Errorf("the tool's result held content item %d of type %s, which the hub cannot check for control characters and secrets; only text, image, audio, resource link and embedded resource content can be passed on", e.item, e.name)
	}
	if e.key {
		at = "a key of " + at
	}
	return &BinaryError{Where: at, Reason: e.reason, Offset: e.offset}
}

// formatPath writes a path innermost-last, e.g. "$.rows[3].name"; path is
// held innermost-first, as the error gathered it.
func formatPath(path []pathElem) string {
	var b strings.Builder
	b.WriteByte('$')
	for i := len(path) - 1; i >= 0; i-- {
		p := path[i]
		switch {
		case p.isIdx:
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		case isIdent(p.key):
			b.WriteString("." + p.key)
		default:
			b.WriteString("[" + strconv.Quote(p.key) + "]")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	for i := range len(s) {
		if c := s[i]; !(c == '_' || isAlnum(c)) || (i == 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// finish turns the walk's error into the caller's. A rule's refusal
// stands only if the answer is one a client could read at all: redo walks
// it again, applying no rule, to find out.
func (w *walker) finish(err error, redo func() error) error {
	e, ok := err.(*ruleError)
	if !ok {
		return err
	}
	w.check = true
	defer func() { w.check = false }()
	if merr := redo(); merr != nil {
		return merr
	}
	return e.public()
}

// readString reads the string token at in[i] as a client decodes it. text
// is valid until the next call; repaired reports text that differs from
// the token's bytes other than by escapes (a decoder's U+FFFD).
func (w *walker) readString(in []byte, i int) (end int, text string, repaired bool, err error) {
	tok, ok := rawjson.ScanString(in, i)
	if ok && !tok.Escaped {
		// The string's bytes are its text: read in place, never copied
		// unless the rules change it (in is not written while the walk
		// runs, and the view does not outlive the string's turn).
		return tok.End, unsafe.String(unsafe.SliceData(tok.Body), len(tok.Body)), false, nil
	}
	if !ok {
		var found bool
		if end, found = stringEnd(in, i); !found {
			return 0, "", false, errSyntax
		}
	} else {
		end = tok.End
	}
	body := in[i+1 : end-1]
	if w.typed && !w.check {
		if off, bad := replacedByEncoder(body); bad {
			return 0, "", false, &ruleError{kind: ruleBinary, reason: reasonInvalid, offset: off}
		}
	}
	if ok {
		if w.scratch, ok = rawjson.Unquote(w.scratch[:0], body); ok {
			return end, unsafe.String(unsafe.SliceData(w.scratch), len(w.scratch)), false, nil
		}
	}
	// Bytes that are not UTF-8, or an escaped lone surrogate: read as
	// encoding/json reads them (the SDK's decoder reads them alike).
	var s string
	if json.Unmarshal(in[i:end], &s) != nil {
		return 0, "", false, errSyntax
	}
	return end, s, true, nil
}

// stringEnd finds the end of the string token at in[i] whatever bytes it
// holds, checking only what JSON itself requires of a string.
func stringEnd(in []byte, i int) (int, bool) {
	for j := i + 1; j < len(in); {
		switch c := in[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if j+1 >= len(in) {
				return 0, false
			}
			switch in[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, err := strconv.ParseUint(string(in[min(j+2, len(in)):min(j+6, len(in))]), 16, 16); err != nil || j+6 > len(in) {
					return 0, false
				}
				j += 6
			default:
				return 0, false
			}
		default:
			j++
		}
	}
	return 0, false
}

// replacedByEncoder finds, in a string body encoding/json wrote from a Go
// string, the first byte that was not UTF-8: a raw invalid byte (copied
// from a json.RawMessage) or the escape \ufffd encoding/json writes in its
// place. off is its offset in the Go string.
func replacedByEncoder(body []byte) (off int, bad bool) {
	at := -1
	if !utf8.Valid(body) {
		for i := 0; i < len(body); {
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				at = i
				break
			}
			i += size
		}
	}
	for i := 0; i < len(body) && (at < 0 || i < at); i++ {
		if body[i] != '\\' {
			continue
		}
		if i+5 < len(body) && body[i+1] == 'u' && strings.EqualFold(string(body[i+2:i+6]), "fffd") {
			at = i
			break
		}
		i++ // the escaped byte
	}
	if at < 0 {
		return 0, false
	}
	prefix, ok := rawjson.Unquote(nil, body[:at])
	if !ok {
		return at, true
	}
	return len(prefix), true
}

// textOf applies the rules to one string the walk read.
func (w *walker) textOf(text string, key bool) (string, error) {
	clean, berr := w.s.text(text, w.set)
	if berr != nil {
		return "", &ruleError{kind: ruleBinary, reason: berr.Reason, offset: berr.Offset, key: key}
	}
	return clean, nil
}

// freeBuf is the sanitised text of one free value: nil until a string in
// it changed, then everything up to in[last].
type freeBuf struct {
	out  []byte
	last int
}

func (f *freeBuf) replace(in []byte, start, end int, s string) {
	f.out = append(f.out, in[f.last:start]...)
	f.out = rawjson.AppendString(f.out, s)
	f.last = end
}

// free sanitises the free JSON value at in[i] (structured content, a
// _meta, a log's data: any shape, every string its own): its end, and its
// text as sanitised, which is in[i:end] itself when nothing changed.
// renameKeys applies ForeignMetaKey to the keys of the value's own object
// (a _meta of a third-party server's). depth is the nesting of what holds
// the value.
func (w *walker) free(in []byte, i, depth int, renameKeys bool) (int, []byte, error) {
	f := freeBuf{last: i}
	end, err := w.fvalue(in, i, depth, &f, renameKeys)
	if err != nil {
		return 0, nil, err
	}
	if f.out == nil {
		return end, in[i:end], nil
	}
	return end, append(f.out, in[f.last:end]...), nil
}

func (w *walker) fvalue(in []byte, i, depth int, f *freeBuf, renameKeys bool) (int, error) {
	if i >= len(in) {
		return 0, errSyntax
	}
	switch in[i] {
	case '"':
		end, _, err := w.fstring(in, i, f, false, false)
		return end, err
	case '{':
		return w.fobject(in, i, depth+1, f, renameKeys)
	case '[':
		return w.farray(in, i, depth+1, f)
	}
	return scalarEnd(in, i)
}

// scalarEnd reads a number or a literal.
func scalarEnd(in []byte, i int) (int, error) {
	if c := in[i]; c == '{' || c == '[' || c == '"' {
		return 0, errSyntax
	}
	end, err := rawjson.Value(in, i, nil)
	if err != nil {
		return 0, errSyntax
	}
	return end, nil
}

// fstring sanitises one string of a free value; changed reports that the
// text a client reads differs (a key so changed may now equal another).
func (w *walker) fstring(in []byte, i int, f *freeBuf, key, renameKey bool) (end int, changed bool, err error) {
	end, text, repaired, err := w.readString(in, i)
	if e, ok := err.(*ruleError); ok {
		e.key = key
	}
	if err != nil || w.check {
		return end, false, err
	}
	clean, err := w.textOf(text, key)
	if err != nil {
		return 0, false, err
	}
	if renameKey {
		clean = ForeignMetaKey(clean)
	}
	if clean == text && !repaired {
		return end, false, nil
	}
	if !key && w.rewrite != nil && clean != text {
		// Rewrite may keep what it is given: text may view memory this
		// walk reuses, so it gets its own copy.
		clean = w.rewrite(strings.Clone(text), clean)
	}
	f.replace(in, i, end, clean)
	return end, clean != text, nil
}

func (w *walker) fobject(in []byte, i, depth int, f *freeBuf, renameKeys bool) (int, error) {
	if err := opening(in, i, depth, '{', "an object"); err != nil {
		return 0, err
	}
	start := i
	keysChanged := false
	end, err := members(in, i, func(keyAt, valAt int) (int, error) {
		_, changed, err := w.fstring(in, keyAt, f, true, renameKeys)
		if err != nil {
			return 0, err
		}
		keysChanged = keysChanged || changed
		end, err := w.fvalue(in, valAt, depth, f, false)
		if err != nil {
			return 0, w.underKey(err, in, keyAt, renameKeys)
		}
		return end, nil
	})
	if err == nil && keysChanged {
		err = w.collisions(in, start, depth, renameKeys)
	}
	return end, err
}

// members calls fn with where each member's key and value start, in the
// object at in[i]; fn answers where the value ends.
func members(in []byte, i int, fn func(keyAt, valAt int) (int, error)) (int, error) {
	i = rawjson.WS(in, i+1)
	if i < len(in) && in[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(in) || in[i] != '"' {
			return 0, errSyntax
		}
		keyAt := i
		end, ok := stringEnd(in, i)
		if !ok {
			return 0, errSyntax
		}
		if i = rawjson.WS(in, end); i >= len(in) || in[i] != ':' {
			return 0, errSyntax
		}
		valAt := rawjson.WS(in, i+1)
		if valAt >= len(in) {
			return 0, errSyntax
		}
		end, err := fn(keyAt, valAt)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = afterItem(in, end, '}'); done || err != nil {
			return i, err
		}
	}
}

// afterItem reads what follows a member or element ending at end: a comma
// and where the next one starts, or the closing bracket and where the
// container ends.
func afterItem(in []byte, end int, closing byte) (next int, done bool, err error) {
	i := rawjson.WS(in, end)
	switch {
	case i >= len(in):
	case in[i] == ',':
		return rawjson.WS(in, i+1), false, nil
	case in[i] == closing:
		return i + 1, true, nil
	}
	return 0, false, errSyntax
}

// elements calls fn with where each element of the array at in[i] starts;
// fn answers where it ends.
func elements(in []byte, i int, fn func(n, at int) (int, error)) (int, error) {
	i = rawjson.WS(in, i+1)
	if i < len(in) && in[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		if i >= len(in) {
			return 0, errSyntax
		}
		end, err := fn(n, i)
		if err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = afterItem(in, end, ']'); done || err != nil {
			return i, err
		}
	}
}

func (w *walker) farray(in []byte, i, depth int, f *freeBuf) (int, error) {
	if err := opening(in, i, depth, '[', "an array"); err != nil {
		return 0, err
	}
	return elements(in, i, func(n, at int) (int, error) {
		end, err := w.fvalue(in, at, depth, f, false)
		if e, ok := err.(*ruleError); ok {
			e.path = append(e.path, pathElem{index: n, isIdx: true})
		}
		return end, err
	})
}

// finalKey is the key at in[keyAt] as the client reads it once sanitised,
// in its own memory; ok is false if the rules refuse it.
func (w *walker) finalKey(in []byte, keyAt int, renameKeys bool) (decoded, final string, ok bool) {
	_, text, _, err := w.readString(in, keyAt)
	if err != nil {
		return "", "", false
	}
	decoded = strings.Clone(text)
	clean, berr := w.s.text(decoded, w.set)
	if berr != nil {
		return decoded, "", false
	}
	if renameKeys {
		clean = ForeignMetaKey(clean)
	}
	return decoded, clean, true
}

// underKey adds the member's key to the path of a rule's error from
// within its value: the key as sanitised, so a secret key is not named.
func (w *walker) underKey(err error, in []byte, keyAt int, renameKeys bool) error {
	if e, ok := err.(*ruleError); ok {
		_, key, _ := w.finalKey(in, keyAt, renameKeys)
		e.path = append(e.path, pathElem{key: key})
	}
	return err
}

// collisions refuses an object in which two keys became one: keeping
// either value would silently drop the other. Only an object in which a
// key changed is looked at again.
func (w *walker) collisions(in []byte, i, depth int, renameKeys bool) error {
	seen := map[string]string{}
	var found error
	check := w.check
	w.check = true
	_, err := members(in, i, func(keyAt, valAt int) (int, error) {
		if decoded, final, ok := w.finalKey(in, keyAt, renameKeys); ok && found == nil {
			if prev, dup := seen[final]; dup && prev != decoded {
				found = &ruleError{kind: ruleCollision, name: final}
			}
			seen[final] = decoded
		}
		return w.fvalue(in, valAt, depth, nil, false)
	})
	w.check = check
	if err != nil {
		return err
	}
	return found
}
