package sanitize

import (
	"errors"
	"unsafe"

	"github.com/crewlet/hub/servers/rawjson"
)

// The one-pass walk: JSON text is read once, every string in it (object
// keys included) goes through the same rules as Text, and the text is
// copied only from the first string that changed. A value that needs no
// change costs one scan and no allocation.
//
// The walk handles the text a well-behaved server sends. Anything it would
// have to judge differently from a decode into Go values (a string that is
// not valid UTF-8 or holds a lone surrogate, binary data, a key the rules
// change, nesting past the SDK's bound) is left to the full path, which
// decodes the value and says exactly what is wrong: errNotOnePass.

// errNotOnePass says the value must be sanitised by decoding it.
var errNotOnePass = errors.New("sanitize: the value needs the full path")

// rawWalker sanitises one JSON value held in in.
type rawWalker struct {
	s       *Sanitizer
	set     *secretSet
	rewrite Rewrite // applied to strings that changed; nil: none
	in      []byte
	out     []byte // nil until a string changed
	last    int    // in[last:] is not yet accounted for in out
	scratch []byte // decoded strings with escapes
}

// sanitizeJSON sanitises the JSON value in, which must be the whole of it
// (surrounding space aside). It answers in itself when nothing changed.
func (s *Sanitizer) sanitizeJSON(in []byte, set *secretSet, rewrite Rewrite) ([]byte, error) {
	w := rawWalker{s: s, set: set, rewrite: rewrite, in: in}
	if err := rawjson.Whole(in, w.str); err != nil {
		return nil, errNotOnePass
	}
	if w.out == nil {
		return in, nil
	}
	return append(w.out, in[w.last:]...), nil
}

// str sanitises one string token. A key the rules would change goes to the
// full path, which tells two keys that become one apart from keys that
// merely change.
func (w *rawWalker) str(tok rawjson.String) error {
	var text string
	if tok.Escaped {
		var ok bool
		if w.scratch, ok = rawjson.Unquote(w.scratch[:0], tok.Body); !ok {
			return errNotOnePass
		}
		text = unsafe.String(unsafe.SliceData(w.scratch), len(w.scratch))
	} else {
		// The string's bytes are its text: read in place, never copied
		// unless the rules change it (in is not written while the walk
		// runs, and the view does not outlive this call).
		text = unsafe.String(unsafe.SliceData(tok.Body), len(tok.Body))
	}
	clean, berr := w.s.text(text, w.set)
	if berr != nil {
		return errNotOnePass
	}
	if clean == text {
		return nil
	}
	if tok.Key {
		return errNotOnePass
	}
	if w.rewrite != nil {
		// Rewrite may keep what it is given: text views memory this walk
		// reuses, so it gets its own copy.
		clean = w.rewrite(string([]byte(text)), clean)
	}
	w.out = append(w.out, w.in[w.last:tok.Start]...)
	w.out = rawjson.AppendString(w.out, clean)
	w.last = tok.End
	return nil
}
