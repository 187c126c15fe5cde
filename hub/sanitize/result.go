//lint:file-ignore SA1019 a tool use or result (deprecated with sampling) is content the SDK writes as its own; the walk refuses it in a result.

package sanitize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result returns a sanitised copy of a third-party server's tool result,
// by the rules ResultOnePass applies to the result's JSON: the result is
// written as JSON once, walked once and read back. Structured content that
// needed no change is the very value r holds; changed, it reads as decoded
// JSON (numbers as json.Number, so large integers stay exact).
//
// A text field holding binary data is refused with a sentence saying which
// content item (indexed from 0) and why, and no result: the caller should
// refuse the result rather than pass on part of it. r is never modified,
// and the copy shares nothing with it but unchanged structured content.
func (s *Sanitizer) Result(r *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	return s.typedResult(r, nil, true)
}

// Rewrite is given each string of a result's structured content that the
// sanitiser changed, as it was and as sanitised, and answers the string to
// keep. A first-party server's fences are digests of the text they wrap,
// so the hub re-issues them over what the sanitiser made of that text.
type Rewrite func(raw, clean string) string

// ResultWith sanitises a first-party server's result as Result does, with
// rewrite (nil: none) applied to every string of the structured content the
// sanitiser changed. Its _meta keys are the hub's own words (a refusal's
// class among them) and are kept as they are.
func (s *Sanitizer) ResultWith(r *mcp.CallToolResult, rewrite Rewrite) (*mcp.CallToolResult, error) {
	return s.typedResult(r, rewrite, false)
}

func (s *Sanitizer) typedResult(r *mcp.CallToolResult, rewrite Rewrite, foreign bool) (*mcp.CallToolResult, error) {
	if r == nil {
		return nil, nil
	}
	for i, c := range r.Content {
		switch c.(type) {
		case nil:
		case *mcp.TextContent, *mcp.ImageContent, *mcp.AudioContent, *mcp.ResourceLink, *mcp.EmbeddedResource,
			*mcp.ToolUseContent, *mcp.ToolResultContent:
			if reflect.ValueOf(c).IsNil() {
				// The SDK cannot write it (its writer fails on one).
				return nil, malformed("content item %d is nil", i)
			}
		default:
			// Another type would be written as whatever it says it is.
			return nil, (&ruleError{kind: ruleUncheckable, item: i, name: fmt.Sprintf("%T", c)}).public()
		}
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("the tool's result held a value that could not be encoded as JSON (%v)", err)
	}
	op, err := s.newWalker(foreign, true).resultOf(raw, rewrite)
	if err != nil {
		return nil, err
	}
	structured := op.Structured
	op.Structured = nil
	var out mcp.CallToolResult
	if err := json.Unmarshal(op.AppendJSON(nil), &out); err != nil {
		return nil, malformed("%v", err)
	}
	if r.Content == nil && len(out.Content) == 0 {
		out.Content = nil
	}
	switch {
	case structured == nil:
	case within(structured, raw):
		out.StructuredContent = r.StructuredContent
	default:
		if out.StructuredContent, err = decodeJSON(structured); err != nil {
			return nil, malformed("%v", err)
		}
	}
	return &out, nil
}

// within reports whether sub is a slice of buf's memory: a value the walk
// answered as it came.
func within(sub, buf []byte) bool {
	if len(sub) == 0 || len(buf) == 0 {
		return false
	}
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= b && p < b+uintptr(len(buf))
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

// viaJSON sanitises a message the hub holds as Go values by the one walk:
// written as JSON once, walked by its shape, read back into a new T. A
// third party's (foreign) _meta keys that read as the hub's are renamed.
func viaJSON[T any](s *Sanitizer, v *T, sh *shape, foreign bool) (*T, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the server's message could not be encoded as JSON (%v)", err)
	}
	w := s.newWalker(foreign, true)
	walk := func() ([]byte, error) {
		out, _, err := w.walkShape(nil, raw, 0, 0, sh)
		return out, err
	}
	out, err := walk()
	if err != nil {
		return nil, w.finish(err, func() error { _, err := walk(); return err })
	}
	t := new(T)
	if err := json.Unmarshal(out, t); err != nil {
		return nil, malformed("%v", err)
	}
	return t, nil
}
