package sanitize

import (
	"encoding/json"
	"strings"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OnePass is a tool result sanitised from the JSON its server sent, in
// one pass over that text, never decoded into Go values: what a go-sdk
// client would read of the result, after the rules.
//
// Each field is JSON ready to be written out. What the SDK would drop
// while decoding the result (members it does not know) is dropped here
// too, and nothing unchecked passes.
type OnePass struct {
	// Content is the content array.
	Content []byte
	// Structured is the structured content; nil: none.
	Structured []byte
	// Meta is the result's _meta after the rules, without the keys the
	// protocol reserves (io.modelcontextprotocol/...), which describe the
	// hop the result came on; nil when nothing is left.
	Meta []byte
	// IsError is set for a failed call.
	IsError bool
	// Complete is set when the server marked the result complete (a
	// 2026-07-28 result type).
	Complete bool
	// Protocol is the other members the protocol gives a result, written
	// `"key":value` and joined by commas, ready to splice into an object;
	// nil: none. A result type other than "complete" is sanitised as
	// text; the requests for input as the requests they stand for
	// (sampling, elicitation), their ids and methods as they came; the
	// request state, an opaque value the client echoes, as it came.
	Protocol []byte
}

// AppendJSON appends the whole result object.
func (op OnePass) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"content":`...)
	if len(op.Content) == 0 {
		dst = append(dst, "[]"...)
	}
	dst = append(dst, op.Content...)
	if op.Structured != nil {
		dst = append(append(dst, `,"structuredContent":`...), op.Structured...)
	}
	if op.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if op.Meta != nil {
		dst = append(append(dst, `,"_meta":`...), op.Meta...)
	}
	if op.Complete {
		dst = append(dst, `,"resultType":"complete"`...)
	}
	if op.Protocol != nil {
		dst = append(append(dst, ','), op.Protocol...)
	}
	return append(dst, '}')
}

// ResultOnePass sanitises a third-party server's tool result, given as the
// JSON text of the JSON-RPC response's result: every piece of text in it
// (text content, text resources, resource link names, titles,
// descriptions, URIs and MIME types, annotations, structured content,
// _meta) has control characters stripped and secrets redacted, and every
// _meta key that would read as the hub's own is renamed (ForeignMetaKey):
// only the hub speaks as the hub.
//
// Image and audio content and blob resources are binary by type and pass
// as they came. If any text field holds binary data, two keys of an object
// become one, or the result holds content the hub cannot check (a tool use
// or tool result), the error's message is a sentence saying where and why,
// and there is no result: the caller refuses it rather than pass on part
// of it. A result no go-sdk client could read is ErrMalformed.
//
// rewrite is applied to every string of the structured content the rules
// changed (nil: none).
func (s *Sanitizer) ResultOnePass(raw []byte, rewrite Rewrite) (OnePass, error) {
	return s.newWalker(true, false).resultOf(raw, rewrite)
}

// FirstPartyOnePass sanitises a result of one of the hub's own servers as
// ResultOnePass does a third party's, except that its _meta keys are the
// hub's own words (a refusal's class among them) and are kept as they are.
func (s *Sanitizer) FirstPartyOnePass(raw []byte, rewrite Rewrite) (OnePass, error) {
	return s.newWalker(false, false).resultOf(raw, rewrite)
}

// JSONOnePass sanitises one JSON value (a first-party server's structured
// content, say), applying rewrite to every string the rules changed. It
// answers raw itself when nothing changed; ok is false when the value
// holds binary data or is not JSON.
func (s *Sanitizer) JSONOnePass(raw []byte, rewrite Rewrite) ([]byte, bool) {
	w := s.newWalker(false, false)
	w.rewrite = rewrite
	out, err := w.wholeFree(raw, "", false)
	return out, err == nil
}

// AppendJSONString appends text, bytes of UTF-8, as a JSON string: how a
// result's JSON becomes its text content.
func AppendJSONString(dst, text []byte) []byte {
	return rawjson.AppendString(dst, text)
}

// wholeFree sanitises raw, which must be one free JSON value and nothing
// else, named where in an error.
func (w *walker) wholeFree(raw []byte, where string, renameKeys bool) ([]byte, error) {
	walk := func() ([]byte, error) {
		i := rawjson.WS(raw, 0)
		end, out, err := w.free(raw, i, 0, renameKeys)
		if err == nil && rawjson.WS(raw, end) != len(raw) {
			err = errSyntax
		}
		return out, frame(err, where)
	}
	out, err := walk()
	if err != nil {
		return nil, w.finish(err, func() error { _, err := walk(); return err })
	}
	return out, nil
}

// resultOf is ResultOnePass and FirstPartyOnePass.
func (w *walker) resultOf(raw []byte, rewrite Rewrite) (OnePass, error) {
	op, err := w.result(raw, rewrite)
	if err != nil {
		return OnePass{}, w.finish(err, func() error { _, err := w.result(raw, rewrite); return err })
	}
	return op, nil
}

// protocolPrefix starts the _meta keys the protocol reserves.
const protocolPrefix = "io.modelcontextprotocol/"

func (w *walker) result(raw []byte, rewrite Rewrite) (OnePass, error) {
	var op OnePass
	i := rawjson.WS(raw, 0)
	if i >= len(raw) {
		return op, errSyntax
	}
	var end int
	var err error
	var resultType, inputRequests, requestState []byte
	switch raw[i] {
	case 'n':
		// null reads as a result with nothing in it.
		end, err = scalarEnd(raw, i)
	case '{':
		end, err = members(raw, i, func(keyAt, valAt int) (int, error) {
			key, err := w.keyOf(raw, keyAt)
			if err != nil {
				return 0, err
			}
			// A member given twice reads as the last one, but for _meta,
			// whose maps the SDK's decoder merges.
			switch key {
			case "content":
				if op.Content == nil {
					// Room for the rest of the result: the content is
					// most of one, so it is written without growing.
					op.Content = make([]byte, 0, len(raw)-valAt+32)
				}
				op.Content, end, err = w.walkShape(op.Content[:0], raw, valAt, 1, resultContents)
				if string(op.Content) == "null" {
					op.Content = nil
				}
				return end, err
			case "structuredContent":
				w.rewrite = rewrite
				end, op.Structured, err = w.free(raw, valAt, 1, false)
				w.rewrite = nil
				if string(op.Structured) == "null" {
					op.Structured = nil
				}
				return end, frame(err, "its structured content")
			case "_meta":
				op.Meta, end, err = w.resultMeta(op.Meta, raw, valAt)
				return end, frame(err, "its _meta")
			case "isError":
				var v []byte
				v, end, err = w.walkShape(nil, raw, valAt, 1, boolShape)
				op.IsError = string(v) == "true"
				return end, err
			case "resultType":
				resultType, end, err = w.walkShape(nil, raw, valAt, 1, textShape)
				return end, frame(err, "its result type")
			case "inputRequests":
				inputRequests, end, err = w.inputRequests(raw, valAt)
				return end, frame(err, "its input requests")
			case "requestState":
				requestState, end, err = w.walkShape(nil, raw, valAt, 1, stringShape)
				return end, err
			}
			return w.skip(raw, valAt, 1)
		})
	default:
		return op, malformed("it is %s, not an object", what(raw[i]))
	}
	if err != nil {
		return OnePass{}, err
	}
	if rawjson.WS(raw, end) != len(raw) {
		return OnePass{}, errSyntax
	}
	if op.Content == nil {
		op.Content = []byte("[]")
	}
	if op.Meta != nil {
		if len(op.Meta) == 1 {
			op.Meta = nil // nothing left: the SDK leaves an empty _meta out
		} else {
			op.Meta = append(op.Meta, '}')
		}
	}
	switch string(resultType) {
	case `"complete"`:
		op.Complete = true
	case "", "null", `""`:
	default:
		op.Protocol = appendMember(op.Protocol, "resultType", resultType)
	}
	if inputRequests != nil && string(inputRequests) != "null" {
		op.Protocol = appendMember(op.Protocol, "inputRequests", inputRequests)
	}
	if requestState != nil && string(requestState) != "null" && string(requestState) != `""` {
		op.Protocol = appendMember(op.Protocol, "requestState", requestState)
	}
	return op, nil
}

// inputRequests walks a result's requests for input. The SDK reads them
// with rules of their own (encoding/json's, keys in any case), so what is
// walked is what it read, as it writes it: a rare member, read twice.
func (w *walker) inputRequests(raw []byte, i int) ([]byte, int, error) {
	end, err := w.skip(raw, i, 1)
	if err != nil {
		return nil, 0, err
	}
	var m mcp.InputRequestMap
	if json.Unmarshal(raw[i:end], &m) != nil {
		return nil, 0, malformed("its requests for input are not ones the SDK reads")
	}
	if m == nil {
		return nil, end, nil
	}
	read, err := json.Marshal(m)
	if err != nil {
		return nil, 0, malformed("its requests for input are not ones the SDK writes (%v)", err)
	}
	out, _, err := w.walkShape(nil, read, 0, 1, inputRequestsShape)
	return out, end, err
}

func appendMember(dst []byte, key string, val []byte) []byte {
	if dst != nil {
		dst = append(dst, ',')
	}
	dst = rawjson.AppendString(dst, key)
	return append(append(dst, ':'), val...)
}

// resultMeta walks a result's own _meta into dst, an object left open
// ("{" and members), so that a second _meta merges into it as the SDK's
// decoder merges it. The keys the protocol reserves are dropped.
func (w *walker) resultMeta(dst, raw []byte, i int) ([]byte, int, error) {
	if raw[i] == 'n' {
		end, err := scalarEnd(raw, i)
		return dst, end, err
	}
	if raw[i] != '{' {
		return nil, 0, malformed("its _meta is %s", what(raw[i]))
	}
	if dst == nil {
		dst = []byte{'{'}
	}
	start := i
	keysChanged := false
	end, err := members(raw, i, func(keyAt, valAt int) (int, error) {
		decoded, final, ok := w.finalKey(raw, keyAt, w.foreign)
		if strings.HasPrefix(decoded, protocolPrefix) || (ok && strings.HasPrefix(final, protocolPrefix)) {
			return w.skip(raw, valAt, 2)
		}
		if len(dst) > 1 {
			dst = append(dst, ',')
		}
		f := freeBuf{last: keyAt}
		end, changed, err := w.fstring(raw, keyAt, &f, true, w.foreign)
		if err != nil {
			return 0, err
		}
		keysChanged = keysChanged || changed
		dst = append(dst, f.out...)
		dst = append(dst, raw[f.last:end]...)
		dst = append(dst, ':')
		end, val, err := w.free(raw, valAt, 2, false)
		if err != nil {
			return 0, w.underKey(err, raw, keyAt, w.foreign)
		}
		dst = append(dst, val...)
		return end, nil
	})
	if err == nil && keysChanged {
		err = w.collisions(raw, start, 2, w.foreign)
	}
	return dst, end, err
}
