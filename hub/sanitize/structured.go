package sanitize

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// structured sanitises a structured content value: every string in it,
// object keys included. Values that need no change are returned as they
// are, so a large clean value costs a walk and no copy.
func (w *decWalker) structured(where string, v any) (any, error) {
	w.path = w.path[:0]
	out, _, err := w.value(where, v)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// at names the current position for an error message, e.g.
// "its structured content at $.rows[3].name".
func (w *decWalker) at(where string) string {
	if len(w.path) == 0 {
		return where
	}
	return where + " at " + decFormatPath(w.path)
}

func decFormatPath(path []decPathElem) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, p := range path {
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

// str sanitises a string found inside a JSON value. The error location is
// formatted only on failure: a large value holds many strings.
func (w *decWalker) str(where, in string) (string, error) {
	out, berr := w.s.text(in, w.set)
	if berr != nil {
		berr.Where = w.at(where)
		return "", berr
	}
	if w.rewrite != nil && out != in {
		out = w.rewrite(in, out)
	}
	return out, nil
}

// value sanitises any JSON-encodable value and reports whether the result
// differs from v.
func (w *decWalker) value(where string, v any) (any, bool, error) {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64, json.Number:
		return v, false, nil
	case string:
		out, err := w.str(where, x)
		return out, out != x, err
	case map[string]any:
		m, changed, err := w.walkMap(where, x)
		return m, changed, err
	case []any:
		return w.walkSlice(where, x)
	case json.RawMessage:
		return w.walkRaw(where, x)
	default:
		return w.walkTyped(where, v)
	}
}

// walkMap sanitises keys and values, copying the map only if something
// changed.
func (w *decWalker) walkMap(where string, m map[string]any) (map[string]any, bool, error) {
	type change struct {
		key string
		val any
	}
	var changes map[string]change
	for k, v := range m {
		nk, berr := w.s.text(k, w.set)
		if berr != nil {
			berr.Where = "a key of " + w.at(where)
			return nil, false, berr
		}
		w.path = append(w.path, decPathElem{key: nk})
		nv, changed, err := w.value(where, v)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return nil, false, err
		}
		if nk != k || changed {
			if changes == nil {
				changes = make(map[string]change)
			}
			changes[k] = change{nk, nv}
		}
	}
	if changes == nil {
		return m, false, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if c, ok := changes[k]; ok {
			k, v = c.key, c.val
		}
		if _, dup := out[k]; dup {
			// Keeping either value would silently drop the other.
			return nil, false, fmt.Errorf("the tool's result held two keys in %s that are the same once control characters and secrets are removed (%s), so the result cannot be passed on whole",
				w.at(where), strconv.Quote(k))
		}
		out[k] = v
	}
	return out, true, nil
}

// walkSlice sanitises the elements, copying the slice only if something
// changed.
func (w *decWalker) walkSlice(where string, a []any) ([]any, bool, error) {
	var out []any
	for i, v := range a {
		w.path = append(w.path, decPathElem{index: i, isIdx: true})
		nv, changed, err := w.value(where, v)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return nil, false, err
		}
		if changed && out == nil {
			out = make([]any, len(a))
			copy(out, a)
		}
		if out != nil {
			out[i] = nv
		}
	}
	if out == nil {
		return a, false, nil
	}
	return out, true, nil
}

// decodeJSON decodes data keeping numbers as json.Number, so that large
// integers survive the round trip exactly.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encodeJSON encodes v without HTML escaping: the output is data for the
// caller, not a web page, and escaping would change bytes needlessly.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// walkRaw sanitises JSON text, keeping it JSON text.
func (w *decWalker) walkRaw(where string, raw json.RawMessage) (any, bool, error) {
	// The decoder would quietly turn invalid UTF-8 into U+FFFD; binary
	// must be refused instead, so look before decoding.
	if off, reason, bad := findBinary(string(raw)); bad && reason != reasonNUL {
		return nil, false, &BinaryError{Where: w.at(where), Reason: reason, Offset: off}
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, false, fmt.Errorf("the tool's result held %s that is not valid JSON (%v)", w.at(where), err)
	}
	nv, changed, err := w.value(where, v)
	if err != nil || !changed {
		return raw, false, err
	}
	out, err := encodeJSON(nv)
	if err != nil {
		return nil, false, fmt.Errorf("the tool's result held %s that could not be encoded again as JSON after sanitising (%v)", w.at(where), err)
	}
	return json.RawMessage(out), true, nil
}

// walkTyped sanitises a value of any other Go type (a struct, a typed map
// or slice ...) through its JSON form, which is what the caller will see.
// If nothing changes, the original typed value is kept.
func (w *decWalker) walkTyped(where string, v any) (any, bool, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("the tool's result held %s that could not be encoded as JSON (%v)", w.at(where), err)
	}
	// encoding/json turns invalid UTF-8 in Go strings into U+FFFD while
	// encoding; find such strings first so binary is refused, not
	// repaired. Marshalling succeeded, so the value is a finite tree.
	if err := w.badString(where, reflect.ValueOf(v)); err != nil {
		return nil, false, err
	}
	// A custom MarshalJSON can emit anything; its bytes are copied as is.
	if off, reason, bad := findBinary(string(data)); bad && reason != reasonNUL {
		return nil, false, &BinaryError{Where: w.at(where), Reason: reason, Offset: off}
	}
	g, err := decodeJSON(data)
	if err != nil {
		return nil, false, fmt.Errorf("the tool's result held %s whose JSON encoding could not be read back (%v)", w.at(where), err)
	}
	nv, changed, err := w.value(where, g)
	if err != nil || !changed {
		return v, false, err
	}
	return nv, true, nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// badString looks for a string in v, in the parts of it that encoding/json
// encodes, that holds binary data, and reports it with its path.
func (w *decWalker) badString(where string, v reflect.Value) error {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return nil // encoded by its own methods; checked after encoding
	}
	switch v.Kind() {
	case reflect.String:
		// Only invalid UTF-8 is looked for: a NUL survives encoding as
		// \u0000 and is refused when the decoded value is walked.
		if off, reason, bad := findBinary(v.String()); bad && reason != reasonNUL {
			return &BinaryError{Where: w.at(where), Reason: reason, Offset: off}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return w.badString(where, v.Elem())
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && f.Tag.Get("json") == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			w.path = append(w.path, decPathElem{key: name})
			err := w.badString(where, v.Field(i))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			key := "?"
			if k := it.Key(); k.Kind() == reflect.String {
				if off, reason, bad := findBinary(k.String()); bad && reason != reasonNUL {
					return &BinaryError{Where: "a key of " + w.at(where), Reason: reason, Offset: off}
				}
				// The key may itself be a secret: name it sanitised.
				key, _ = w.s.text(k.String(), w.set)
			} else if k.CanInterface() {
				key = fmt.Sprint(k.Interface())
			}
			w.path = append(w.path, decPathElem{key: key})
			err := w.badString(where, it.Value())
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // bytes encode as base64: binary by type
		}
		for i := range v.Len() {
			w.path = append(w.path, decPathElem{index: i, isIdx: true})
			err := w.badString(where, v.Index(i))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	}
	return nil
}
