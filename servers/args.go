package servers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/google/jsonschema-go/jsonschema"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/crewlet/hub/authority"
)

// decodeArgs checks raw arguments against the tool's schema and decodes them.
// Everything wrong here is the caller's input, so it is claimed as invalid
// with the schema's own words naming the argument (REF-3, REF-4).
//
// defaults says whether the schema declares any default to fill in; when
// it declares none, the arguments are decoded as they came, without the
// checked value being written out and read again first.
func decodeArgs(raw any, schema *jsonschema.Resolved, defaults bool, into any) *authority.Refusal {
	var data []byte
	switch v := raw.(type) {
	case nil:
		data = []byte("{}")
	case json.RawMessage:
		data = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return authority.Refuse(authority.Invalid, "The arguments could not be read as JSON: %v.", err)
		}
		data = b
	}
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		data = []byte("{}")
	}
	// Made here, small: given none, the fast decoder makes room for 64
	// arguments, where most calls pass two or three.
	m := map[string]any{}
	if err := unmarshal(data, &m); err != nil {
		return authority.Refuse(authority.Invalid, "The arguments must be a JSON object: %v.", err)
	}
	if r := checkText("", m); r != nil {
		return r
	}
	if err := schema.Validate(m); err != nil {
		return authority.Refuse(authority.Invalid, "The arguments do not fit this tool's schema: %v.", err)
	}
	if !defaults {
		if err := unmarshal(data, into); err != nil {
			return authority.Refuse(authority.Invalid, "The arguments do not fit this tool's schema: %v.", err)
		}
		return nil
	}
	if err := schema.ApplyDefaults(&m); err != nil {
		return authority.Refuse(authority.Invalid, "The arguments do not fit this tool's schema: %v.", err)
	}
	b, _ := json.Marshal(m)
	if err := unmarshal(b, into); err != nil {
		return authority.Refuse(authority.Invalid, "The arguments do not fit this tool's schema: %v.", err)
	}
	return nil
}

// unmarshal decodes arguments with segmentio's decoder, which yields what
// encoding/json does at a fraction of its CPU. Its errors quote the input
// itself, though, so when it fails encoding/json decodes afresh, and a
// refusal says what is wrong in the standard library's words.
func unmarshal(data []byte, v any) error {
	if fastjson.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return json.Unmarshal(data, v)
}

// declaresDefaults reports whether a schema declares a default anywhere:
// read from its JSON, where a property that is itself called "default" only
// makes the answer yes, which costs speed, never correctness.
func declaresDefaults(schema *jsonschema.Schema) bool {
	b, err := json.Marshal(schema)
	return err != nil || bytes.Contains(b, []byte(`"default":`))
}

// CheckArgumentText is the kit's rule on text in arguments, for arguments
// the kit does not decode itself: the hub applies it to a third-party
// tool's arguments before forwarding them, so a control character is
// refused there in the same words as here, rather than forwarded and
// answered back as binary. Arguments that are not JSON pass: reading them
// is their server's business.
func CheckArgumentText(raw json.RawMessage) *authority.Refusal {
	if !mayHoldControl(raw) {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return checkText("", v)
}

// mayHoldControl is a quick look for what a control character can be in
// JSON text: an escape (\u00XX, \b, \f), or DEL or a C1 character as
// such (C0 characters are not valid JSON unescaped). Most calls have none,
// and are not decoded twice.
func mayHoldControl(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u00`)) || bytes.Contains(raw, []byte(`\b`)) || bytes.Contains(raw, []byte(`\f`)) ||
		bytes.IndexByte(raw, 0x7f) >= 0 {
		return true
	}
	for i := 0; i+1 < len(raw); i++ {
		// U+0080..U+009F are C2 80..C2 9F in UTF-8.
		if raw[i] == 0xc2 && raw[i+1] >= 0x80 && raw[i+1] <= 0x9f {
			return true
		}
	}
	return false
}

// checkText refuses a string anywhere in v that holds a control character
// other than a tab or a line break: stored, it would make what a server
// keeps unreadable to the hub's result sanitiser, which rejects such bytes
// in every answer that carries them. It names the argument and where the
// character is, so the caller can mend exactly that (OUT-2).
func checkText(path string, v any) *authority.Refusal {
	switch x := v.(type) {
	case string:
		for i, r := range x {
			if isControl(r) {
				name := path
				if name == "" {
					name = "an argument"
				}
				return authority.Refuse(authority.Invalid, "%s holds a control character (U+%04X) at byte %d; text sent here may hold tabs and line breaks but no other control characters. Remove it and send the call again.", name, r, i).
					WithData("argument", path)
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if r := checkText(p, x[k]); r != nil {
				return r
			}
		}
	case []any:
		for i, e := range x {
			if r := checkText(fmt.Sprintf("%s[%d]", path, i), e); r != nil {
				return r
			}
		}
	}
	return nil
}

// isControl reports a C0 or C1 control character or DEL, except tab, line
// feed and carriage return.
func isControl(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	}
	return false
}

// PageLimit is how many rows a list answers: def when the caller sent no
// limit (0), the caller's when it lies in 1..most, and otherwise a refusal
// naming the argument, so a model learns the range rather than being
// quietly handed another page size than it asked for.
func PageLimit(limit, def, most int) (int, error) {
	if limit == 0 {
		return def, nil
	}
	if limit < 1 || limit > most {
		return 0, authority.Refuse(authority.Invalid, "limit %d is outside 1 to %d.", limit, most).WithData("argument", "limit")
	}
	return limit, nil
}
