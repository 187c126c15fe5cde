package hub

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkjson "github.com/segmentio/encoding/json"
)

// How the SDK reads what names a call: its JSON-RPC id, and a client's
// notifications/cancelled. The fast path must read both exactly as the
// SDK path does, or a call the client cancelled keeps running on one path
// and not the other (issue 36, finding 8), and an id comes back otherwise
// on one (finding 7).
//
// go-sdk v1.8.0 decodes a message with segmentio's decoder, keys matched
// case-sensitively, escapes resolved (jsonrpc.DecodeMessage); an id is
// decoded as a JSON value and a number made an int64 through float64
// (jsonrpc.MakeID), so 9007199254740993 is the call 9007199254740992 and
// 5.0 the call 5; the cancellation's params are decoded the same way
// (mcp.CancelledParams) and its requestId made an id by that rule. The
// hub calls the SDK's own DecodeMessage and MakeID, and decodes params
// with the same decoder under the same setting.

// sdkUnmarshal decodes as the SDK's internal decoder does: keys matched
// exactly, never case-insensitively as encoding/json matches them.
func sdkUnmarshal(data []byte, v any) error {
	dec := sdkjson.NewDecoder(bytes.NewReader(data))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(v)
}

// fastID reads the id of a request the fast path may answer: an integer
// of at most 18 digits, or a string of printable ASCII without escapes;
// ok is false for any other, which the SDK answers. It answers the id as
// the SDK keys the call and the id as the SDK writes it back: an integer
// past 2^53 comes back as the float64 the SDK read it as, made an int64
// again.
func fastID(raw []byte) (id jsonrpc.ID, written []byte, ok bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		tok, ok := rawjson.ScanString(raw, 0)
		if !ok || tok.Escaped || tok.End != len(raw) {
			return jsonrpc.ID{}, nil, false
		}
		for _, c := range raw[1 : len(raw)-1] {
			// What encoding/json would write otherwise (U+2028, invalid
			// UTF-8) is the SDK's to write.
			if c < 0x20 || c > 0x7e {
				return jsonrpc.ID{}, nil, false
			}
		}
		id, err := jsonrpc.MakeID(string(raw[1 : len(raw)-1]))
		return id, raw, err == nil
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return jsonrpc.ID{}, nil, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return jsonrpc.ID{}, nil, false
		}
	}
	// Read as the SDK reads it: a float64, made an int64 (MakeID).
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return jsonrpc.ID{}, nil, false
	}
	if id, err = jsonrpc.MakeID(f); err != nil {
		return jsonrpc.ID{}, nil, false
	}
	if len(digits) <= 15 {
		// Exact in a float64: the id comes back as written.
		return id, raw, true
	}
	return id, strconv.AppendInt(nil, int64(f), 10), true
}

// sdkRequests are the requests and notifications of a POST's body as the
// SDK reads them: a message or a batch of them, each decoded by the SDK's
// own DecodeMessage; none for a body the SDK refuses whole (one message
// it cannot read).
func sdkRequests(body []byte) []*jsonrpc.Request {
	msgs := [][]byte{body}
	var batch []json.RawMessage
	if sdkUnmarshal(body, &batch) == nil {
		msgs = msgs[:0]
		for _, m := range batch {
			msgs = append(msgs, m)
		}
	}
	var reqs []*jsonrpc.Request
	for _, raw := range msgs {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil
		}
		if req, ok := msg.(*jsonrpc.Request); ok {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// cancelledIDs are the ids of the calls a POST's messages (sdkRequests)
// cancel, read as the SDK reads them; a cancellation whose params do not
// decode is one the SDK refuses with the whole POST, so it cancels
// nothing.
func cancelledIDs(reqs []*jsonrpc.Request) []jsonrpc.ID {
	var ids []jsonrpc.ID
	for _, req := range reqs {
		if req.Method != "notifications/cancelled" {
			continue
		}
		var p mcp.CancelledParams
		if len(req.Params) > 0 {
			if err := sdkUnmarshal(req.Params, &p); err != nil {
				return nil
			}
		}
		if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
			ids = append(ids, id)
		}
	}
	return ids
}

// A progress token on the SDK's path: the SDK decodes a request's _meta
// into values, so a numeric token is a float64 by the time the hub reads
// it (9007199254740993 is 9007199254740992, 1e2 is 100). The hub forwards
// progress itself, so it carries the token as the client wrote it: the
// route reads the body's tokens before the SDK does (spelledTokens), the
// request carries them to the call (sdkAuth, as the TokenInfo's extra),
// and the call takes the spelling whose value the SDK gave it.

// spelledToken is a progress token whose spelling the SDK's decoding
// changes: its value as the SDK reads it, and the token as written.
type spelledToken struct {
	value any
	raw   json.RawMessage
}

type spelledTokensKey struct{}

// spelledTokensExtra keys a request's spelled tokens in its TokenInfo.
const spelledTokensExtra = "crewlet/progress-tokens"

// spelledTokens reads the progress tokens of a body's requests that the
// SDK would not write back as written; nil when there are none (the
// common case, a string token, costs one search of the body).
func spelledTokens(body []byte) []spelledToken {
	if !bytes.Contains(body, []byte("progressToken")) && !bytes.Contains(body, []byte(`\u`)) {
		return nil
	}
	var out []spelledToken
	for _, req := range sdkRequests(body) {
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if len(req.Params) == 0 || sdkUnmarshal(req.Params, &p) != nil {
			continue
		}
		raw := p.Meta["progressToken"]
		var v any
		if raw == nil || sdkUnmarshal(raw, &v) != nil {
			continue
		}
		switch v.(type) {
		case float64, string:
		default:
			continue
		}
		again, err := json.Marshal(v)
		if err != nil || bytes.Equal(again, raw) {
			continue
		}
		var compact bytes.Buffer
		if json.Compact(&compact, raw) != nil {
			continue
		}
		out = append(out, spelledToken{value: v, raw: compact.Bytes()})
	}
	return out
}

// progressTokenOf is a call's progress token as its client wrote it:
// the SDK's value, or the one spelling of that value among the request's
// spelled tokens.
func progressTokenOf(req *mcp.CallToolRequest) any {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return tok
	}
	spelled, _ := req.Extra.TokenInfo.Extra[spelledTokensExtra].([]spelledToken)
	var raw json.RawMessage
	for _, s := range spelled {
		if s.value != tok {
			continue
		}
		if raw != nil && !bytes.Equal(raw, s.raw) {
			// Two spellings of one value in a batch: which call wrote
			// which is not the SDK's to say, so the value stands.
			return tok
		}
		raw = s.raw
	}
	if raw == nil {
		return tok
	}
	return raw
}
