//lint:file-ignore SA1019 a hub answers sampling and roots requests (deprecated in 2026-07-28, SEP-2577) for servers of the session revisions, which still send them.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool call: the request is written by the hub itself, its arguments the
// bytes the caller sent, and the answer handed back as the JSON the server
// wrote, for the hub to sanitise in one pass. It travels on the link of
// the server's transport (link.go), whatever the tool and the revision: a
// call the link sent is finished on it, whatever the server answers, and
// never sent again, since a server that acted on it would act twice
// (issue 25 defect 3).

// linkSetup is what a link needs of the session the SDK opened: the
// revision it speaks and, from 2026-07-28 on, the _meta every request
// carries (the protocol version, the client's identity and capabilities),
// as the SDK's client wrote it on its own requests, and the tools whose
// arguments go in headers too (by name).
type linkSetup struct {
	version    string
	meta       []byte // the members of that _meta, braces stripped; nil before 2026-07-28
	headerArgs map[string][]paramBinding
}

// callIDs numbers the hub's calls.
var callIDs atomic.Int64

// CallRaw runs a tool on the server, answering its result as the JSON the
// server wrote. res is always nil: every call is answered raw. Every call
// is told to the instance's HopObserver.
func (i *Instance) CallRaw(ctx context.Context, name string, args json.RawMessage) (raw json.RawMessage, res *mcp.CallToolResult, err error) {
	i.mu.Lock()
	sess, recorded, lk, setup := i.sess, i.recorded, i.calls, i.callSetup
	i.mu.Unlock()
	hopCtx, hopDone := i.opts.Hops.HopStarted(ctx, i.opts.Spec.Name, name)
	raw, err = i.callTool(hopCtx, sess, recorded, lk, setup, name, args)
	hopDone(err)
	return raw, nil, err
}

// maxInputRounds bounds the rounds of a call whose server keeps asking for
// input, as the SDK's client bounds them.
const maxInputRounds = 10

func (i *Instance) callTool(ctx context.Context, sess *mcp.ClientSession, recorded chan struct{}, lk link, setup linkSetup, name string, args json.RawMessage) (json.RawMessage, error) {
	if sess == nil || lk == nil {
		return nil, i.downError(false)
	}
	if err := ctx.Err(); err != nil {
		// As the SDK's client: nothing is sent on an ended context.
		return nil, err
	}
	f := i.flights.add(ctx, downstreamFrom(ctx))
	defer i.flights.remove(f)
	hdr := paramHeaders(setup.headerArgs[name], args)
	rounds, _ := ctx.Value(roundsKey{}).(*ClientRounds)
	var carried []byte
	if rounds != nil {
		var err error
		if carried, err = rounds.members(); err != nil {
			return nil, err
		}
	}
	raw, err := lk.call(ctx, f, toolsCall(name, args, f.token, setup.meta, carried), hdr)
	// Issue 25 defect 3: a result that asks the client for input is, from
	// 2026-07-28 on, the first round of a multi round-trip request
	// (SEP-2322): the client's answers go back in a new request carrying
	// them, never in the same request sent again. On a session revision
	// those members mean nothing to the protocol, and the result is
	// answered as the server wrote it. A client that answers input
	// requests itself (ClientRounds) is answered the result as it is:
	// its answers come in a call of its own.
	for round := 1; err == nil && rounds == nil && setup.version >= modernVersion && AsksForInput(raw); round++ {
		if round >= maxInputRounds {
			err = &UnreadableError{Why: fmt.Sprintf("it asked for the client's input %d times over without answering", round)}
			break
		}
		var more []byte
		if more, err = i.fulfil(ctx, f, raw); err != nil {
			break
		}
		raw, err = lk.call(ctx, f, toolsCall(name, args, f.token, setup.meta, more), hdr)
	}
	if err == nil {
		switch {
		case ctx.Err() != nil:
			// A call whose context ended answers the context's error, as
			// the SDK's client does, even where the answer raced it in:
			// the caller is gone or out of time, and whatever reads the
			// answer next must see the call as cut, not as answered.
			return nil, ctx.Err()
		case len(raw) == 0 || string(raw) == "null":
			err = &UnreadableError{Why: "a response without a result"}
		case !utf8.Valid(raw):
			// The SDK's decoder passes such bytes on; the hub's
			// sanitiser and its clients would not read them.
			err = &UnreadableError{Why: "bytes that are not valid UTF-8"}
		default:
			return raw, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var unreadable *UnreadableError
	if errors.As(err, &unreadable) {
		unreadable.Server = i.opts.Spec.Name
		i.log.Warn("server_answer_unreadable", "tool", name, "reason", unreadable.Why)
		return nil, err
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return nil, err
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The remote could not be reached: its session is as good as
		// ended. End it, so the death watch restarts it on the schedule.
		// A call that never got a connection was not sent.
		var op *net.OpError
		sent := !(errors.As(err, &op) && op.Op == "dial")
		_ = sess.Close()
		waitRecorded(recorded)
		return nil, i.downError(sent)
	}
	if errors.Is(err, errSessionGone) {
		_ = sess.Close()
		waitRecorded(recorded)
		return nil, i.downError(true)
	}
	if errors.Is(err, errAnswerCut) {
		// Only the call's own connection broke: the session is not known
		// to have ended, so nothing waits for its end, and the answer
		// says nothing of one.
		i.log.Warn("server_answer_cut", "tool", name)
		return nil, &CutError{Server: i.opts.Spec.Name}
	}
	if errors.Is(err, errLinkBroken) {
		waitRecorded(recorded)
		return nil, i.downError(true)
	}
	return nil, err
}

// CutError is a call whose answer was cut off on its way back: the
// connection that carried that call alone (a streamable HTTP server's
// answer to its POST) broke before the answer was whole, with nothing to
// resume it from, while the server's session is not known to have ended.
// The call reached the server, so it may have taken effect; the server
// is not down, so nothing is said of a restart.
type CutError struct {
	Server string
}

func (e *CutError) Error() string {
	return fmt.Sprintf("the answer of MCP server %s was cut off: %v", e.Server, errAnswerCut)
}

// UnreadableError is a call the server answered with something the hub
// cannot read: bytes that are not well-formed JSON (invalid UTF-8, nesting
// past the SDK's bound), a message past the size bound, a response to
// another request. The server took the call, so it may have taken effect,
// and the same call again would be answered the same way: it is the
// server's failure, refused as not retryable (issue 25 defect 5). It
// unwraps to a JSON-RPC error, which is how a caller tells a server's own
// failure from the engine's (REF-6: no class; internal_error on a
// person's surface), never as a condition that clears.
type UnreadableError struct {
	Server string
	Why    string // what was wrong with the answer, in the engine's words
}

func (e *UnreadableError) Error() string {
	server := "The MCP server"
	if e.Server != "" {
		server = fmt.Sprintf("The MCP server %q", e.Server)
	}
	return server + " answered the call with something the hub could not read (" + e.Why + "). " +
		"The call reached the server, so it may have taken effect: check before repeating it, since the same call is likely to be answered the same way."
}

// Unwrap makes the refusal a protocol error of the server's.
func (e *UnreadableError) Unwrap() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: e.Error()}
}

// waitRecorded gives the death watch a moment to record a session's end,
// so the answer says what took the server down.
func waitRecorded(recorded chan struct{}) {
	select {
	case <-recorded:
	case <-time.After(2 * time.Second):
	}
}

// toolsCall is a tools/call request with an id of its own: the arguments
// as they came, the progress token the hub gave the call, the _meta a
// 2026-07-28 request carries, and more params members (a later round's
// inputResponses and requestState), written as they are after a comma.
func toolsCall(name string, args json.RawMessage, token string, meta, more []byte) *jsonrpc.Request {
	b := make([]byte, 0, 64+len(name)+len(args)+len(meta)+len(more))
	b = append(b, `{"name":`...)
	b = rawjson.AppendString(b, name)
	if len(args) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, args...)
	}
	if token != "" || len(meta) > 0 {
		b = append(b, `,"_meta":{`...)
		if token != "" {
			b = append(b, `"progressToken":`...)
			b = rawjson.AppendString(b, token)
			if len(meta) > 0 {
				b = append(b, ',')
			}
		}
		b = append(b, meta...)
		b = append(b, '}')
	}
	if len(more) > 0 {
		b = append(append(b, ','), more...)
	}
	b = append(b, '}')
	id, _ := jsonrpc.MakeID(callPrefix + strconv.FormatInt(callIDs.Add(1), 10))
	return &jsonrpc.Request{ID: id, Method: "tools/call", Params: b}
}

// AsksForInput reports a result that asks the client for input
// (2026-07-28 multi round-trip requests).
func AsksForInput(raw []byte) bool {
	asks := false
	_ = rawjson.Members(raw, func(key, _, val []byte) error {
		switch string(key) {
		case "inputRequests":
			asks = asks || string(val) != "null"
		case "resultType":
			asks = asks || string(val) == `"input_required"`
		}
		return nil
	})
	return asks
}

// ClientRounds is a call whose client answers a 2026-07-28 server's
// requests for input itself (SEP-2322), in calls of its own: a client on
// 2026-07-28, which the hub cannot ask anything while it serves a call. A
// result asking for input is answered to such a caller as the server
// wrote it, never fulfilled by the hub, and the call that carries the
// client's answers carries them on to the server.
type ClientRounds struct {
	// Responses are the client's answers its call carried (inputResponses),
	// by the keys of the requests they answer; nil on a first call.
	Responses mcp.InputResponseMap
	// State is the server's own requestState to echo, as the server wrote
	// it; "" for none. It is the caller's to check that the state is one
	// the server gave this caller for this tool.
	State string
}

type roundsKey struct{}

// WithClientRounds marks ctx as a call whose client answers input requests
// itself; r is what its call brings back.
func WithClientRounds(ctx context.Context, r *ClientRounds) context.Context {
	return context.WithValue(ctx, roundsKey{}, r)
}

// members writes the params members a call of r carries on to the server:
// inputResponses and requestState, or nothing on a first call.
func (r *ClientRounds) members() ([]byte, error) {
	var more []byte
	if r.Responses != nil {
		b, err := json.Marshal(r.Responses)
		if err != nil {
			return nil, fmt.Errorf("the client's input responses could not be written: %w", err)
		}
		more = append([]byte(`"inputResponses":`), b...)
	}
	if r.State != "" {
		if more != nil {
			more = append(more, ',')
		}
		more = rawjson.AppendString(append(more, `"requestState":`...), r.State)
	}
	return more, nil
}

// metaMembers reads, from the params of a request the SDK's client wrote,
// the _meta members a tool call the hub writes must carry too. nil when there are
// none (a session revision).
func metaMembers(params []byte) []byte {
	var meta []byte
	_ = rawjson.Members(params, func(key, _, val []byte) error {
		if string(key) == "_meta" {
			meta = val
		}
		return nil
	})
	if len(meta) < 2 {
		return nil
	}
	out := []byte{}
	_ = rawjson.Members(meta, func(key, keyRaw, val []byte) error {
		if string(key) == "progressToken" {
			return nil
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, keyRaw...), ':'), val...)
		return nil
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// serverRequest answers a request a server sends while a tool call runs on
// a session revision, as the SDK's client would answer it: through the
// client of the call f when the request came on that call's own response
// stream, else (f nil) of the call its _meta names by progress token.
func (i *Instance) serverRequest(ctx context.Context, f *flight, method string, params json.RawMessage) (any, error) {
	switch method {
	case "ping":
		return struct{}{}, nil
	case "sampling/createMessage":
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return i.sampleFor(ctx, f, &p)
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return i.elicitFor(ctx, f, &p)
	case "roots/list":
		var p mcp.ListRootsParams
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
		}
		return i.rootsFor(ctx, f, &p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
}

// fulfil answers the input a 2026-07-28 result asks for (SEP-2322)
// through the client of the call it answers, and writes the params
// members of the request that carries the answers on: inputResponses and
// the requestState to echo.
func (i *Instance) fulfil(ctx context.Context, f *flight, raw json.RawMessage) ([]byte, error) {
	var r struct {
		InputRequests mcp.InputRequestMap `json:"inputRequests"`
		RequestState  json.RawMessage     `json:"requestState"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &UnreadableError{Why: "input requests the hub could not read: " + err.Error()}
	}
	responses := map[string]any{}
	for key, req := range r.InputRequests {
		var res any
		var err error
		switch p := req.(type) {
		case *mcp.ElicitParams:
			res, err = i.elicitFor(ctx, f, p)
		case *mcp.CreateMessageWithToolsParams:
			var base *mcp.CreateMessageParams
			if base, err = samplingBase(p); err == nil {
				res, err = i.sampleFor(ctx, f, base)
			}
		case *mcp.ListRootsParams:
			res, err = i.rootsFor(ctx, f, p)
		default:
			err = fmt.Errorf("an input request of type %T", req)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"The server asked for the client's input (%q) before it would finish the call, and none could be given: %v", key, err)}
		}
		responses[key] = res
	}
	b, err := json.Marshal(responses)
	if err != nil {
		return nil, err
	}
	more := append([]byte(`"inputResponses":`), b...)
	if len(r.RequestState) > 0 && string(r.RequestState) != "null" {
		more = append(append(more, `,"requestState":`...), r.RequestState...)
	}
	return more, nil
}

// samplingBase is a sampling input request as a client of the session
// revisions takes it: one content block per message and no tools.
func samplingBase(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	if len(p.Tools) > 0 || p.ToolChoice != nil {
		return nil, errors.New("sampling with tools, which the hub does not relay")
	}
	msgs := make([]*mcp.SamplingMessage, 0, len(p.Messages))
	for _, m := range p.Messages {
		if len(m.Content) != 1 {
			return nil, fmt.Errorf("a sampling message of %d content blocks, which the hub does not relay", len(m.Content))
		}
		msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: m.Content[0]})
	}
	return &mcp.CreateMessageParams{Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens, Messages: msgs,
		Metadata: p.Metadata, ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences,
		SystemPrompt: p.SystemPrompt, Temperature: p.Temperature}, nil
}
