package sanitize

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/crewlet/hub/servers/rawjson"
)

// A shape is what the walk knows of a part of a message: which of its
// members are text a client reads, which are binary by type or protocol
// state that passes as it came, and what type each must be for a go-sdk
// client to decode it. The walk follows the shape where there is one and
// treats what has none as a free value (every string its own).
type shape struct {
	kind   kind
	fields []field // object, content
	elem   *shape  // array, map
	// keepUnknown: members the shape does not name pass as free values;
	// else they are dropped, as the SDK drops what it does not know.
	keepUnknown bool
	// noun names an object, or with %d an array's element, in an error:
	// it stands for the "{}" of the field's where.
	noun string
	// content: the types of item allowed (else refused as uncheckable)
	// and how an item is named.
	allow   uint16
	naming  contentNaming
	methods map[string]*shape // input request: the params each method has
}

type field struct {
	key string
	sh  *shape
	// where names the field in an error; "{}" stands for what holds it.
	where string
	// types: for a content item, the types that keep the field (the SDK
	// reads every field of every item, so the others are only checked).
	types uint16
}

type kind uint8

const (
	kFree          kind = iota // any JSON value, every string sanitised
	kText                      // a string (or null) a client reads
	kString                    // a string (or null) of protocol state: passed as it came
	kAny                       // any JSON value of protocol state: passed as it came
	kMeta                      // a _meta object (or null)
	kBinary                    // base64 (or null): binary by type, passed as it came
	kBool                      // true, false or null
	kInt                       // an integer in int64 (or null)
	kFloat                     // a number in float64 (or null)
	kFreeObject                // an object (or null) of any members: map[string]any
	kObject                    // an object (or null) of the fields named
	kArray                     // an array (or null) of elem
	kMap                       // an object (or null) of elem
	kContent                   // a content item
	kContents                  // an array (or null) of content items
	kContentOrList             // a content item or an array of them
	kInputRequest              // a request for input: params by method
)

// walkShape walks the value at in[i] by sh, appending its sanitised text
// to dst. depth is the nesting of what holds it.
func (w *walker) walkShape(dst, in []byte, i, depth int, sh *shape) ([]byte, int, error) {
	if i >= len(in) {
		return nil, 0, errSyntax
	}
	c := in[i]
	if c == 'n' && sh.kind != kContent && sh.kind != kContentOrList {
		// null reads as the zero value of every Go type the SDK uses.
		end, err := scalarEnd(in, i)
		if err != nil {
			return nil, 0, err
		}
		return append(dst, "null"...), end, nil
	}
	switch sh.kind {
	case kFree, kMeta, kFreeObject:
		if sh.kind != kFree && c != '{' {
			return nil, 0, malformed("an object member is %s", what(c))
		}
		end, out, err := w.free(in, i, depth, sh.kind == kMeta && w.foreign)
		return append(dst, out...), end, err
	case kAny:
		check := w.check
		w.check = true
		end, err := w.fvalue(in, i, depth, nil, false)
		w.check = check
		return append(dst, in[i:end]...), end, err
	case kText, kString, kBinary:
		if c != '"' {
			return nil, 0, malformed("a string member is %s", what(c))
		}
		end, text, repaired, err := w.readString(in, i)
		if err != nil {
			return nil, 0, err
		}
		switch {
		case sh.kind == kBinary:
			// The SDK decodes it: what it cannot is no answer.
			if _, err := base64.StdEncoding.DecodeString(text); err != nil {
				return nil, 0, malformed("binary data is not base64")
			}
		case sh.kind == kText && !w.check:
			clean, err := w.textOf(text, false)
			if err != nil {
				return nil, 0, err
			}
			if clean != text || repaired {
				return rawjson.AppendString(dst, clean), end, nil
			}
		case repaired:
			return rawjson.AppendString(dst, text), end, nil
		}
		return append(dst, in[i:end]...), end, nil
	case kBool:
		end, err := scalarEnd(in, i)
		if err != nil || (c != 't' && c != 'f') {
			return nil, 0, malformed("a boolean member is %s", what(c))
		}
		return append(dst, in[i:end]...), end, nil
	case kInt, kFloat:
		end, err := scalarEnd(in, i)
		if err != nil || !(c == '-' || '0' <= c && c <= '9') {
			return nil, 0, malformed("a number member is %s", what(c))
		}
		if sh.kind == kInt {
			_, err = strconv.ParseInt(string(in[i:end]), 10, 64)
		} else {
			_, err = strconv.ParseFloat(string(in[i:end]), 64)
		}
		if err != nil {
			return nil, 0, malformed("the number %s does not fit its member", in[i:end])
		}
		return append(dst, in[i:end]...), end, nil
	case kObject, kMap:
		return w.object(dst, in, i, depth+1, sh)
	case kArray, kContents:
		return w.array(dst, in, i, depth+1, sh)
	case kContent, kContentOrList:
		if c == '[' && sh.kind == kContentOrList {
			return w.array(dst, in, i, depth+1, sh)
		}
		return w.item(dst, in, i, depth+1, sh, -1)
	case kInputRequest:
		return w.inputRequest(dst, in, i, depth+1, sh)
	}
	panic("sanitize: unknown shape")
}

// what names the JSON value starting with c, for a malformed answer.
func what(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	case c == 'n':
		return "null"
	}
	return "not JSON"
}

// opening checks that in[i] opens the container a shape wants (open),
// within the SDK's bound on nesting; name says what it is for an error.
func opening(in []byte, i, depth int, open byte, name string) error {
	if in[i] != open {
		return malformed("%s is %s", name, what(in[i]))
	}
	if depth > maxDepth {
		return malformed("it nests deeper than %d levels", maxDepth)
	}
	return nil
}

// keyOf is the text of the key at in[keyAt] and where the key ends.
func (w *walker) keyOf(in []byte, keyAt int) (string, error) {
	_, key, _, err := w.readString(in, keyAt)
	return key, err
}

func (sh *shape) field(key string) *field {
	for i := range sh.fields {
		if sh.fields[i].key == key {
			return &sh.fields[i]
		}
	}
	return nil
}

// object walks an object of named fields. Keys are matched exactly, as
// the SDK's decoder matches them.
func (w *walker) object(dst, in []byte, i, depth int, sh *shape) ([]byte, int, error) {
	if err := opening(in, i, depth, '{', "an object member"); err != nil {
		return nil, 0, err
	}
	dst = append(dst, '{')
	n := 0
	end, err := members(in, i, func(keyAt, valAt int) (int, error) {
		key, err := w.keyOf(in, keyAt)
		if err != nil {
			return 0, err
		}
		f := sh.field(key)
		if f == nil && !sh.keepUnknown && sh.kind != kMap {
			return w.skip(in, valAt, depth)
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		var end int
		if f == nil {
			if sh.kind == kMap {
				// The key is the server's id for the entry: protocol
				// state, passed as it came.
				dst, _, err = w.walkShape(dst, in, keyAt, depth, stringShape)
			} else {
				dst, err = w.keyText(dst, in, keyAt)
			}
			if err != nil {
				return 0, err
			}
			val := &freeShape
			if sh.elem != nil {
				val = sh.elem
			}
			if dst, end, err = w.walkShape(append(dst, ':'), in, valAt, depth, val); err != nil {
				return 0, w.underKey(err, in, keyAt, false)
			}
		} else {
			dst = append(rawjson.AppendString(dst, f.key), ':')
			if dst, end, err = w.walkShape(dst, in, valAt, depth, f.sh); err != nil {
				return 0, frame(err, f.where)
			}
		}
		return end, nil
	})
	if err != nil {
		return nil, 0, frame(err, sh.noun)
	}
	return append(dst, '}'), end, nil
}

var freeShape = shape{kind: kFree}

// skip checks a value the client reads and drops.
func (w *walker) skip(in []byte, i, depth int) (int, error) {
	check := w.check
	w.check = true
	end, err := w.fvalue(in, i, depth, nil, false)
	w.check = check
	return end, err
}

func (w *walker) array(dst, in []byte, i, depth int, sh *shape) ([]byte, int, error) {
	if err := opening(in, i, depth, '[', "an array member"); err != nil {
		return nil, 0, err
	}
	dst = append(dst, '[')
	end, err := elements(in, i, func(n, at int) (int, error) {
		if n > 0 {
			dst = append(dst, ',')
		}
		var end int
		var err error
		if sh.kind == kArray {
			dst, end, err = w.walkShape(dst, in, at, depth, sh.elem)
			if err != nil && sh.noun != "" {
				err = frame(err, nounAt(sh.noun, n))
			}
		} else {
			dst, end, err = w.item(dst, in, at, depth+1, sh, n)
		}
		return end, err
	})
	if err != nil {
		return nil, 0, err
	}
	return append(dst, ']'), end, nil
}

// Content types, as the SDK reads them, and what an error calls each.
const (
	ctText uint16 = 1 << iota
	ctImage
	ctAudio
	ctLink
	ctResource
	ctToolUse
	ctToolResult
)

var contentTypes = map[string]struct {
	name   string
	bit    uint16
	noun   string
	goType string
}{
	"text":          {"text", ctText, "text", "*mcp.TextContent"},
	"image":         {"image", ctImage, "image", "*mcp.ImageContent"},
	"audio":         {"audio", ctAudio, "audio", "*mcp.AudioContent"},
	"resource_link": {"resource_link", ctLink, "resource link", "*mcp.ResourceLink"},
	"resource":      {"resource", ctResource, "embedded resource", "*mcp.EmbeddedResource"},
	"tool_use":      {"tool_use", ctToolUse, "tool use", "*mcp.ToolUseContent"},
	"tool_result":   {"tool_result", ctToolResult, "tool result", "*mcp.ToolResultContent"},
}

// contentNaming is how an error names a content item.
type contentNaming uint8

const (
	itemOfResult contentNaming = iota // "text content item 2"
	itemOf                            // "text content item 2 of {}"
)

// name names item idx (-1: the one content of what holds it).
func (n contentNaming) name(noun string, idx int) string {
	switch {
	case idx < 0:
		return "the " + noun + " content of {}"
	case n == itemOf:
		return fmt.Sprintf("%s content item %d of {}", noun, idx)
	}
	return fmt.Sprintf("%s content item %d", noun, idx)
}

// nounAt names element n by noun, which may say where with %d.
func nounAt(noun string, n int) string {
	if strings.Contains(noun, "%d") {
		return fmt.Sprintf(noun, n)
	}
	return noun
}

// item walks content item idx. The SDK reads every member of every item
// (a text item's data must still be base64) and keeps those of its type;
// its type is the last "type" member, which servers write first.
func (w *walker) item(dst, in []byte, i, depth int, sh *shape, idx int) ([]byte, int, error) {
	if err := opening(in, i, depth, '{', "a content item"); err != nil {
		return nil, 0, err
	}
	typ, first, err := w.firstType(in, i)
	if err != nil {
		return nil, 0, err
	}
	if !first {
		if typ, err = w.lastType(in, i); err != nil {
			return nil, 0, err
		}
	}
	out, end, err := w.itemAs(dst, in, i, depth, sh, idx, typ, first)
	if err != nil && first {
		// A second "type" may say otherwise, before or after what failed:
		// the last one stands.
		last, lerr := w.lastType(in, i)
		if lerr != nil {
			return nil, 0, lerr
		}
		if last != typ || err == errRetype {
			out, end, err = w.itemAs(dst, in, i, depth, sh, idx, last, false)
		}
	}
	return out, end, err
}

var errRetype = malformed("content type given twice")

// firstType reads the type of an item whose first member is its type.
func (w *walker) firstType(in []byte, i int) (typ string, ok bool, err error) {
	j := rawjson.WS(in, i+1)
	if j >= len(in) || in[j] != '"' {
		return "", false, nil
	}
	end, key, _, err := w.readString(in, j)
	if err != nil || key != "type" {
		return "", false, err
	}
	if j = rawjson.WS(in, end); j >= len(in) || in[j] != ':' {
		return "", false, errSyntax
	}
	return w.typeAt(in, rawjson.WS(in, j+1))
}

func (w *walker) typeAt(in []byte, i int) (string, bool, error) {
	if i < len(in) && in[i] == 'n' {
		return "", true, nil
	}
	if i >= len(in) || in[i] != '"' {
		c := byte(0)
		if i < len(in) {
			c = in[i]
		}
		return "", false, malformed("a content type is %s", what(c))
	}
	_, typ, _, err := w.readString(in, i)
	if ct, ok := contentTypes[typ]; ok {
		return ct.name, true, err // the type's own string: typ views reused memory
	}
	return strings.Clone(typ), true, err
}

// lastType reads an item's members for its last "type".
func (w *walker) lastType(in []byte, i int) (string, error) {
	typ := ""
	_, err := members(in, i, func(keyAt, valAt int) (int, error) {
		key, err := w.keyOf(in, keyAt)
		if err != nil {
			return 0, err
		}
		if key == "type" {
			if typ, _, err = w.typeAt(in, valAt); err != nil {
				return 0, err
			}
		}
		return w.skip(in, valAt, 0)
	})
	return typ, err
}

// itemAs walks an item of the type typ; guessed: typ is the first "type"
// member's, and another that says otherwise is errRetype.
func (w *walker) itemAs(dst, in []byte, i, depth int, sh *shape, idx int, typ string, guessed bool) ([]byte, int, error) {
	ct, known := contentTypes[typ]
	dst = append(dst, `{"type":`...)
	dst = rawjson.AppendString(dst, typ)
	end, err := members(in, i, func(keyAt, valAt int) (int, error) {
		key, err := w.keyOf(in, keyAt)
		if err != nil {
			return 0, err
		}
		if key == "type" {
			t, _, err := w.typeAt(in, valAt)
			if err != nil {
				return 0, err
			}
			if guessed && t != typ {
				return 0, errRetype
			}
			return w.skip(in, valAt, depth)
		}
		f := sh.field(key)
		if f == nil {
			return w.skip(in, valAt, depth)
		}
		if !known || f.types&ct.bit == 0 || sh.allow&ct.bit == 0 {
			// Read, as the SDK reads it, and dropped.
			check := w.check
			w.check = true
			_, end, err := w.walkShape(nil, in, valAt, depth, f.sh)
			w.check = check
			return end, err
		}
		dst = append(rawjson.AppendString(append(dst, ','), f.key), ':')
		var end int
		if dst, end, err = w.walkShape(dst, in, valAt, depth, f.sh); err != nil {
			return 0, frame(err, f.where)
		}
		return end, nil
	})
	if err != nil {
		if err == errRetype {
			return nil, 0, err
		}
		if known {
			err = frame(err, sh.naming.name(ct.noun, idx))
		}
		return nil, 0, err
	}
	if !known {
		return nil, 0, malformed("a content item has the type %q, which the SDK does not know", typ)
	}
	if sh.allow&ct.bit == 0 {
		return nil, 0, &ruleError{kind: ruleUncheckable, item: max(idx, 0), name: ct.goType}
	}
	return append(dst, '}'), end, nil
}

// inputRequest walks a request for input a result carries: its params by
// its method, as the SDK reads them.
func (w *walker) inputRequest(dst, in []byte, i, depth int, sh *shape) ([]byte, int, error) {
	if err := opening(in, i, depth, '{', "an input request"); err != nil {
		return nil, 0, err
	}
	method := ""
	_, err := members(in, i, func(keyAt, valAt int) (int, error) {
		key, err := w.keyOf(in, keyAt)
		if err != nil {
			return 0, err
		}
		if key == "method" {
			if in[valAt] != '"' {
				return 0, malformed("an input request's method is %s", what(in[valAt]))
			}
			_, m, _, err := w.readString(in, valAt)
			if err != nil {
				return 0, err
			}
			method = strings.Clone(m)
		}
		return w.skip(in, valAt, depth)
	})
	if err != nil {
		return nil, 0, err
	}
	params, ok := sh.methods[method]
	if !ok {
		return nil, 0, malformed("an input request has the method %q, which the SDK does not know", method)
	}
	req := shape{kind: kObject, fields: []field{
		{key: "method", sh: &shape{kind: kString}},
		{key: "params", sh: params},
	}}
	return w.object(dst, in, i, depth, &req)
}

// keyText appends the key at in[keyAt] of a member no shape names,
// sanitised.
func (w *walker) keyText(dst, in []byte, keyAt int) ([]byte, error) {
	end, text, repaired, err := w.readString(in, keyAt)
	if err != nil {
		return nil, err
	}
	if w.check {
		return append(dst, in[keyAt:end]...), nil
	}
	clean, err := w.textOf(text, true)
	if err != nil {
		return nil, err
	}
	if clean == text && !repaired {
		return append(dst, in[keyAt:end]...), nil
	}
	return rawjson.AppendString(dst, clean), nil
}
