package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// A coding CLI's model calls are the seat's spending as much as the
// builtin agent's rounds: the gateway tells its Meter of each, so the run
// charges them where the host charges its own model calls (the seat's
// budget and telemetry). The provider's usage is read from the answer as
// it passes back: the whole JSON body of a chat completion, or the last
// chunk carrying usage of a streamed one, for which the gateway asks
// (stream_options.include_usage) when the CLI did not.

// Meter is asked, before the gateway sends a model call on, whether the
// call may be made, given the request's size in bytes: an error refuses
// it (nothing is sent, and the CLI is answered the error's words). Else
// done is called once, when the answer has been passed back to the CLI
// or the call failed, with what the call came to.
type Meter func(requestBytes int) (done func(ModelCall), err error)

// ModelCall is one model call the gateway forwarded.
type ModelCall struct {
	Start time.Time
	// Status is the provider's HTTP status; 0 when it was not reached,
	// and Err says why.
	Status int
	Err    error
	// Said is the provider's error message, for a status of 400 or more.
	Said string
	// Input and Output are the tokens the provider reported (its usage);
	// zero where it reported none.
	Input, Output int64
	// Sent and Received are the bytes of the request and of the answer,
	// to estimate from where the provider reported no usage.
	Sent, Received int64
}

// Bounds of what the gateway reads of a model call.
const (
	// maxModelRequest bounds a request the gateway sends on: it is read
	// whole, to be measured and to ask for its usage. A million tokens
	// of context is about 4 MiB of text; with maxModelCallsInFlight a
	// box holds at most 32 MiB of the hub's memory in requests.
	maxModelRequest = 8 << 20
	// maxMeteredBody bounds how much of a whole (unstreamed) answer, or
	// of one line of a streamed one, is kept to read its usage from; an
	// answer past it is passed on whole and its spending estimated.
	maxMeteredBody = 4 << 20
	// maxSaid bounds the provider's error message kept for telemetry.
	maxSaid = 2 << 10
)

// askUsage is a chat-completions request body that asks for its stream's
// usage: a streamed answer reports it only when asked. Any other body is
// answered as it is.
func askUsage(path string, body []byte) []byte {
	if !strings.HasSuffix(path, "/chat/completions") {
		return body
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil || string(bytes.TrimSpace(req["stream"])) != "true" {
		return body
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := req["stream_options"]; ok && json.Unmarshal(raw, &opts) != nil {
		return body
	}
	if string(bytes.TrimSpace(opts["include_usage"])) == "true" {
		return body
	}
	opts["include_usage"] = json.RawMessage("true")
	raw, err := json.Marshal(opts)
	if err != nil {
		return body
	}
	req["stream_options"] = raw
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}

// meteredCall is what the gateway learns of one call as it is forwarded:
// the status and the answer's bytes as they pass (usageReader).
type meteredCall struct {
	ModelCall
	sse  bool
	buf  []byte // a whole answer so far, or a streamed one's current line
	over bool   // buf passed maxMeteredBody
}

// answered is told the provider's answer as it arrives.
func (c *meteredCall) answered(resp *http.Response) {
	c.Status = resp.StatusCode
	c.sse = strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && resp.StatusCode < 400
	resp.Body = &usageReader{ReadCloser: resp.Body, call: c}
}

// read takes in the next bytes of the answer.
func (c *meteredCall) read(p []byte) {
	c.Received += int64(len(p))
	if !c.sse {
		c.keep(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.keep(p)
			return
		}
		c.keep(p[:i])
		c.line()
		p = p[i+1:]
	}
}

func (c *meteredCall) keep(p []byte) {
	if c.over || len(c.buf)+len(p) > maxMeteredBody {
		c.over, c.buf = true, c.buf[:0]
		return
	}
	c.buf = append(c.buf, p...)
}

// line reads one line of a streamed answer: a data line carrying usage
// sets it (the last one read counts).
func (c *meteredCall) line() {
	defer func() { c.buf, c.over = c.buf[:0], false }()
	data, ok := bytes.CutPrefix(bytes.TrimSpace(c.buf), []byte("data:"))
	if !ok || c.over || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	c.usage(data)
}

// usage reads the usage of a JSON answer or chunk, in the names of the
// chat-completions API (prompt_tokens, completion_tokens) or the
// responses API (input_tokens, output_tokens, at the top or under
// response).
func (c *meteredCall) usage(doc []byte) {
	type tokens struct {
		Prompt     int64 `json:"prompt_tokens"`
		Completion int64 `json:"completion_tokens"`
		Input      int64 `json:"input_tokens"`
		Output     int64 `json:"output_tokens"`
	}
	var d struct {
		Usage    *tokens `json:"usage"`
		Response struct {
			Usage *tokens `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	u := d.Usage
	if u == nil {
		u = d.Response.Usage
	}
	if u == nil {
		return
	}
	if in, out := u.Prompt+u.Input, u.Completion+u.Output; in+out > 0 {
		c.Input, c.Output = in, out
	}
}

// result is the call as it ended: the rest of a streamed answer read,
// a whole answer's usage or error message.
func (c *meteredCall) result() ModelCall {
	switch {
	case c.sse:
		if len(c.buf) > 0 {
			c.line()
		}
	case c.over:
	case c.Status >= 400:
		c.Said = errorMessage(c.buf)
	default:
		c.usage(c.buf)
	}
	return c.ModelCall
}

// errorMessage is what a provider's error answer says: its
// error.message, else its text, at most maxSaid bytes of it.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	said := string(bytes.TrimSpace(body))
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		said = e.Error.Message
	}
	if len(said) > maxSaid {
		said = said[:maxSaid]
	}
	return said
}

// usageReader is an answer's body on its way to the CLI, read by the
// call's meter as it passes.
type usageReader struct {
	io.ReadCloser
	call *meteredCall
}

func (r *usageReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.call.read(p[:n])
	return n, err
}

// refuseCall answers the CLI a call its meter refused, in the error shape
// of the API it called, with the refusal's words; 403, which an
// OpenAI-compatible client does not retry.
func refuseCall(w http.ResponseWriter, err error) {
	answerError(w, http.StatusForbidden, "refused", fmt.Sprintf("The hub did not send this model call: %v", err))
}

// answerError answers a call the gateway did not send on with status and
// message, in the error shape of the OpenAI-compatible APIs, so the CLI
// shows its words.
func answerError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": code, "code": code}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
