package hub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The /operator/act route: the dashboard's transport to the operator
// catalogue (OPS-2). It serves the very catalogue /operator/mcp serves,
// through the same router, so a person can do the same things and gets
// the same answers whichever way they come; what differs is how a write
// names its operation. An assistant over MCP sends back the op_id a write
// answered; the dashboard names the operation up front in an
// Idempotency-Key header, scoped to the credential that sent it (OPS-6).
//
//	POST /operator/act
//	Authorization: Bearer <token>
//	Idempotency-Key: <key>          (every write)
//	{"tool": "create_work_item", "arguments": {...}}
//	→ 200 {the tool result: content, structuredContent, isError}
//
// A refused call is a tool result like any other (200, isError, its
// class); only what is wrong with the request itself — its body, or a
// write's key — is an HTTP error.

// IdempotencyKeyHeader names a write's operation on /operator/act.
const IdempotencyKeyHeader = "Idempotency-Key"

// Bounds on what the act body's own fields hold. The arguments are bounded
// by the body's size and then by the tool's schema.
const (
	maxActToolName = 128
	maxActKey      = 255
)

// actBody is the request body of /operator/act.
type actBody struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// actError is the body of a request /operator/act refused as a request.
type actError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Header names the request header the error is about.
	Header string `json:"header,omitempty"`
}

// The codes an act request is refused with. They are the request's, not a
// tool's: a tool's refusal classes arrive inside a 200 tool result.
const (
	actInvalidBody = "invalid_body"
	actOpIDInvalid = "op_id_invalid"
)

// parseActBody reads an act body: one JSON object naming a tool, with an
// object of arguments or none. Anything else — another shape, a field it
// does not know, a second value after the first — is refused, so a body
// is read one way only.
func parseActBody(b []byte) (actBody, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var body actBody
	if err := dec.Decode(&body); err != nil {
		return actBody{}, fmt.Errorf("the body is not a JSON object of tool and arguments: %s", clipErr(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return actBody{}, errors.New("the body holds more than one JSON value; send one object")
	}
	switch {
	case body.Tool == "":
		return actBody{}, errors.New(`the body names no tool: send {"tool": "<name>", "arguments": {...}}`)
	case len(body.Tool) > maxActToolName || !utf8.ValidString(body.Tool) || strings.ContainsFunc(body.Tool, isControl):
		return actBody{}, fmt.Errorf("tool is not a tool's name (at most %d bytes of printable text)", maxActToolName)
	}
	args := bytes.TrimSpace(body.Arguments)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
		body.Arguments = json.RawMessage("{}")
	case args[0] != '{':
		return actBody{}, errors.New("arguments is not a JSON object")
	default:
		// Compacted, so a call reads the same however it was spaced.
		var b bytes.Buffer
		if err := json.Compact(&b, args); err != nil {
			return actBody{}, fmt.Errorf("arguments is not JSON: %s", clipErr(err))
		}
		body.Arguments = b.Bytes()
	}
	return body, nil
}

// hasOpID reports whether a call's arguments carry an op_id.
func hasOpID(args json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return false
	}
	_, ok := m["op_id"]
	return ok
}

// checkKey refuses an Idempotency-Key that cannot name an operation.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("a write on /operator/act needs an %s header naming its operation: a fresh value for a new request, and the same value to send that request again", IdempotencyKeyHeader)
	case len(key) > maxActKey:
		return fmt.Errorf("the %s header is %d bytes; a key is at most %d", IdempotencyKeyHeader, len(key), maxActKey)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		return fmt.Errorf("the %s header holds a character other than printable ASCII", IdempotencyKeyHeader)
	}
	return nil
}

// keyedCaller is the caller of a call whose request carries header h: an
// Idempotency-Key names the call's operation (OPS-6), scoped to the
// caller's credential, so the same request sent again under it lands once
// and answers what it answered, and another request under it is refused.
// One rule for every surface that takes the header: /operator/act and a
// tools/call POSTed to /operator/mcp, on either path.
func keyedCaller(caller authority.Caller, h http.Header) (authority.Caller, error) {
	key := h.Get(IdempotencyKeyHeader)
	if key == "" {
		return caller, nil
	}
	if err := checkKey(key); err != nil {
		return caller, err
	}
	caller.Operation = key
	return caller, nil
}

// keyRefusal is a bad Idempotency-Key on a surface whose answers are tool
// results (/operator/mcp): refused invalid, in act's words.
func keyRefusal(err error) *authority.Refusal {
	return authority.Refuse(authority.Invalid, "%s. Nothing was called.", upperFirst(err.Error())).WithData("header", IdempotencyKeyHeader)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// clipErr keeps a decoder's error short: it can quote the input.
func clipErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// serveAct is POST /operator/act: one call of the operator catalogue,
// decided by the credential on this request.
func (f *operator) serveAct(w http.ResponseWriter, r *http.Request) {
	p, ok := principalFrom(r.Context())
	if !ok {
		writeJSON(w, http.StatusUnauthorized, actError{Error: "unauthorized", Message: "This request carries no operator credential."})
		return
	}
	limit := f.opts.MaxBodyBytes
	if r.ContentLength > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, actError{Error: actInvalidBody, Message: fmt.Sprintf("The request body exceeds %d bytes.", limit)})
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, actError{Error: actInvalidBody, Message: fmt.Sprintf("The request body exceeds %d bytes.", limit)})
			return
		}
		writeJSON(w, http.StatusBadRequest, actError{Error: actInvalidBody, Message: "The request body could not be read."})
		return
	}
	body, err := parseActBody(raw)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, actError{Error: actInvalidBody, Message: upperFirst(err.Error()) + "."})
		return
	}
	reg := CompanyRegistry(f.company)
	key := r.Header.Get(IdempotencyKeyHeader)
	// Reads need no key. A name nothing offers is left to the router,
	// which refuses it as a tool result exactly as /operator/mcp does.
	e, known := reg.Resolve(body.Tool)
	write := known && e.Hints.ReadOnly != servers.Yes
	if key != "" || write {
		if err := checkKey(key); err != nil {
			writeJSON(w, http.StatusBadRequest, actError{Error: actOpIDInvalid, Message: upperFirst(err.Error()) + ".", Header: IdempotencyKeyHeader})
			return
		}
		if hasOpID(body.Arguments) {
			writeJSON(w, http.StatusBadRequest, actError{Error: actOpIDInvalid, Header: IdempotencyKeyHeader,
				Message: fmt.Sprintf("op_id is not taken beside an %s header: the key already names this request's operation. Leave op_id out, and send the same request with the same key to finish it.", IdempotencyKeyHeader)})
			return
		}
	}
	caller, err := keyedCaller(p.Caller(), r.Header)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, actError{Error: actOpIDInvalid, Message: upperFirst(err.Error()) + ".", Header: IdempotencyKeyHeader})
		return
	}
	f.inflight.Add(1)
	defer f.inflight.Add(-1)
	ctx := withCallHeader(r.Context(), &mcp.RequestExtra{Header: r.Header})
	a := f.router.callForPerson(ctx, reg, caller, body.Tool, body.Arguments)
	if a.onePass != nil {
		// The answer as the one pass wrote it, never decoded to be
		// written again.
		writeJSON(w, http.StatusOK, json.RawMessage(a.onePass.AppendJSON(nil)))
		return
	}
	writeJSON(w, http.StatusOK, a.res)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
