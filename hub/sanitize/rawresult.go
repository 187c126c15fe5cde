package sanitize

import (
	"bytes"

	"github.com/crewlet/hub/servers/rawjson"
)

// OnePass is a successful tool result sanitised from the JSON its server
// sent, in one pass over that text, never decoded into Go values: what
// Result makes of the same result, as JSON.
//
// Each field is a JSON value ready to be written out: Content the content
// array, Structured the structured content (nil when there is none), Meta
// the result's _meta without the keys the protocol reserves
// (io.modelcontextprotocol/...), which describe the hop the result came
// on (nil when nothing is left). What the SDK would drop while decoding
// the result (fields it does not know) is dropped here too, and nothing
// unchecked passes.
type OnePass struct {
	Content    []byte
	Structured []byte
	Meta       []byte
	// Complete is set when the server marked the result complete (a
	// 2026-07-28 result type), a mark the full path keeps too.
	Complete bool
}

// ResultOnePass sanitises a tool result given as the JSON text of the
// JSON-RPC response's result. ok is false when the result is one the full
// path must handle (decode it and use ResultWith): a failed result, content
// other than text, annotations, a request for input, binary data or
// anything malformed. The full path then says what Result says, in the
// same words.
//
// rewrite is applied, as by ResultWith, to every string of the structured
// content the rules changed.
func (s *Sanitizer) ResultOnePass(raw []byte, rewrite Rewrite) (OnePass, bool) {
	var out OnePass
	set := s.loadSecrets()
	var content, structured, meta []byte
	var haveContent bool
	err := rawjson.Members(raw, func(key, _, val []byte) error {
		switch string(key) {
		case "content":
			content, haveContent = val, true
		case "structuredContent":
			structured = val
		case "_meta":
			meta = val
		case "isError":
			if string(val) != "false" {
				return errNotOnePass
			}
		case "resultType":
			// A result that asks for input is not an answer yet.
			if string(val) != `"complete"` {
				return errNotOnePass
			}
			out.Complete = true
		case "inputRequests", "requestState":
			return errNotOnePass
		}
		return nil
	})
	if err != nil || !haveContent {
		return OnePass{}, false
	}
	if out.Content, err = s.contentOnePass(content, set); err != nil {
		return OnePass{}, false
	}
	if structured != nil && string(structured) != "null" {
		if out.Structured, err = s.sanitizeJSON(structured, set, rewrite); err != nil {
			return OnePass{}, false
		}
	}
	if meta != nil && string(meta) != "null" {
		if out.Meta, err = s.metaOnePass(meta, set, true); err != nil {
			return OnePass{}, false
		}
	}
	return out, true
}

// contentOnePass writes the content array again, each item as the SDK
// would write the text content it decoded: type, text, _meta.
func (s *Sanitizer) contentOnePass(raw []byte, set *secretSet) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return nil, errNotOnePass
	}
	out := make([]byte, 0, len(raw)+16)
	out = append(out, '[')
	n := 0
	err := rawjson.Elements(raw, func(item []byte) error {
		var text, meta []byte
		var typed bool
		err := rawjson.Members(item, func(key, _, val []byte) error {
			switch string(key) {
			case "type":
				if string(val) != `"text"` {
					return errNotOnePass
				}
				typed = true
			case "text":
				text = val
			case "_meta":
				meta = val
			case "annotations":
				if string(val) != "null" {
					return errNotOnePass
				}
			}
			return nil
		})
		if err != nil || !typed || len(text) == 0 || text[0] != '"' {
			return errNotOnePass
		}
		clean, err := s.sanitizeJSON(text, set, nil)
		if err != nil {
			return err
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"type":"text","text":`...)
		out = append(out, clean...)
		if meta != nil && string(meta) != "null" {
			m, err := s.metaOnePass(meta, set, false)
			if err != nil {
				return err
			}
			if m != nil {
				out = append(out, `,"_meta":`...)
				out = append(out, m...)
			}
		}
		out = append(out, '}')
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(out, ']'), nil
}

// metaOnePass sanitises a _meta object of a third-party result. top drops
// the keys the protocol reserves, as the full path does for a result's own
// _meta. Keys that would read as the hub's are renamed (ForeignMetaKey), as
// the full path renames them. An empty object is answered as nil: the SDK
// leaves an empty _meta out.
func (s *Sanitizer) metaOnePass(raw []byte, set *secretSet, top bool) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotOnePass
	}
	// The keys are looked at one by one only where one may need it: a key
	// the rules drop or rename is spelt in the text, or hidden behind an
	// escape ("\u0063rewlet/..."), which Members declines and so leaves
	// to the full path.
	if !bytes.Contains(raw, []byte(HubMetaPrefix)) && bytes.IndexByte(raw, '\\') < 0 &&
		(!top || !bytes.Contains(raw, []byte(`"io.modelcontextprotocol/`))) {
		clean, err := s.sanitizeJSON(raw, set, nil)
		if err != nil || isEmptyObject(clean) {
			return nil, err
		}
		return clean, nil
	}
	out := []byte{'{'}
	n := 0
	err := rawjson.Members(raw, func(key, keyRaw, val []byte) error {
		// Only the result's own _meta describes the hop; a content
		// item's keeps every key, as the full path keeps it.
		if top && bytes.HasPrefix(key, []byte("io.modelcontextprotocol/")) {
			return nil
		}
		k, err := s.sanitizeJSON(keyRaw, set, nil)
		if err != nil || !bytes.Equal(k, keyRaw) {
			return errNotOnePass
		}
		if name := ForeignMetaKey(string(key)); len(name) != len(key) {
			k = rawjson.AppendString(nil, name)
		}
		v, err := s.sanitizeJSON(val, set, nil)
		if err != nil {
			return err
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(append(append(out, k...), ':'), v...)
		return nil
	})
	if err != nil || n == 0 {
		return nil, err
	}
	return append(out, '}'), nil
}

func isEmptyObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// JSONOnePass sanitises one JSON value (a first-party server's structured
// content, say) in one pass, applying rewrite to every string the rules
// changed. It answers raw itself when nothing changed; ok is false where
// the full path must judge the value (ResultWith on it decoded).
func (s *Sanitizer) JSONOnePass(raw []byte, rewrite Rewrite) ([]byte, bool) {
	out, err := s.sanitizeJSON(raw, s.loadSecrets(), rewrite)
	return out, err == nil
}

// AppendJSONString appends text, bytes of UTF-8, as a JSON string: how a
// result's JSON becomes its text content.
func AppendJSONString(dst, text []byte) []byte {
	return rawjson.AppendString(dst, text)
}
