package hub

import (
	"encoding/json"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 2026-07-28 tools/call result names its type (SEP-2322): "complete",
// or "input_required" when it carries requests for input. A go-sdk server
// writes it on every such result, set by the SDK's own tool dispatch
// (Server.callTool), which the hub's answers do not go through: the
// hub's callMiddleware answers every call itself, and the fast path
// writes its answer without the SDK. So the hub types them itself, by
// the SDK's rule, on both paths (issue 36, Why 10): input requests make
// the result input_required, anything else is complete, whatever type
// the server behind wrote.

// typedResults are a result of each type, decoded: the SDK keeps a
// result's type in a field of its own that only its decoder sets.
var typedResults = func() (out [2]mcp.CallToolResult) {
	for i, t := range []string{"complete", "input_required"} {
		if err := json.Unmarshal([]byte(`{"content":[],"resultType":"`+t+`"}`), &out[i]); err != nil {
			panic(err)
		}
	}
	return out
}()

// typedResult is res with its 2026-07-28 type. Every exported field of the
// SDK's CallToolResult is carried over (TestTypedResultKeepsEveryField
// holds the list to the SDK's).
func typedResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := typedResults[0]
	if res.InputRequests != nil {
		out = typedResults[1]
	}
	out.Meta = res.Meta
	out.Content = res.Content
	out.StructuredContent = res.StructuredContent
	out.IsError = res.IsError
	out.InputRequests = res.InputRequests
	out.RequestState = res.RequestState
	return &out
}

// resultTypeOf types a one-pass answer by the same rule: protocol is its
// other protocol members (OnePass.Protocol), answered without any type
// the server wrote; complete says the answer is complete, and a result
// with input requests says input_required among the members.
func resultTypeOf(protocol []byte) (complete bool, out []byte) {
	if protocol == nil {
		return true, nil
	}
	asks := false
	obj := append(append([]byte{'{'}, protocol...), '}')
	err := rawjson.Members(obj, func(key, keyRaw, val []byte) error {
		switch string(key) {
		case "resultType":
			return nil
		case "inputRequests":
			asks = true
		}
		if out != nil {
			out = append(out, ',')
		}
		out = append(append(append(out, keyRaw...), ':'), val...)
		return nil
	})
	if err != nil {
		// Written by the sanitiser, so always an object's members.
		return false, protocol
	}
	if asks {
		if out != nil {
			out = append(out, ',')
		}
		return false, append(out, `"resultType":"input_required"`...)
	}
	return true, out
}
