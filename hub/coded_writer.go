package hub

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// codedWriter sees to it that no JSON-RPC error leaves /operator/mcp with
// code 0, which names no class of failure a client can act on. Errors the
// hub's own handlers return are coded where they are made (codedErrors);
// this catches the ones the SDK makes itself while checking a request
// before any handler runs (a call before the session's initialized
// notification, a call that opens no session): those are the request's
// fault, Invalid Request.
//
// The SDK writes each message whole, one JSON body or one SSE event per
// Write, so a message is never split across two calls here. Only an error
// at the top of a message is recoded, never text inside a result.
type codedWriter struct {
	http.ResponseWriter
}

// uncoded is the start of a JSON-RPC error message with code 0, on its own
// line (a JSON body, or an SSE event's data line).
var uncoded = regexp.MustCompile(`(?m)^((?:data: )?\{"jsonrpc":"2\.0","id":(?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|null),"error":\{"code":)0,`)

var recoded = []byte("${1}" + strconv.Itoa(jsonrpc.CodeInvalidRequest) + ",")

func (w codedWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"error":{"code":0,`)) {
		q := uncoded.ReplaceAll(p, recoded)
		if _, err := w.ResponseWriter.Write(q); err != nil {
			return 0, err
		}
		// The SDK counts what it wrote against what it meant to.
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps event streams flowing through the wrapper.
func (w codedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w codedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
