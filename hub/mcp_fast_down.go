//lint:file-ignore SA1019 a hub forwards logging, sampling and roots (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fastDown is the client of a fast call, as the server behind the call sees
// it: what the server sends while it serves the call (progress, log lines,
// and on a 2025 session requests of the client) goes out on the call's own
// event stream, as the SDK sends what relates to a request on that
// request's stream. A request of the client is answered by the client's
// next POST to the session, which serveFast hands back here (answered).
type fastDown struct {
	f      *operator
	st     *fastStream
	token  json.RawMessage // as the client wrote it; nil: no progress asked for
	caller string          // the credential the call was made with
	sess   *opSession      // nil on 2026-07-28
	level  mcp.LoggingLevel
	modern bool
	call   context.Context
	// stream is the POST's own context: it ends when the client hangs up,
	// which on a 2025 session leaves the call running (as the SDK leaves
	// it) but with nowhere to send a request of the client.
	stream context.Context
}

var _ upstream.Downstream = (*fastDown)(nil)

func (d *fastDown) Caller() string { return d.caller }

func (d *fastDown) ProgressToken() any {
	if d.token == nil {
		return nil // no token: an untyped nil, which the link reads as none
	}
	return d.token
}

func (d *fastDown) Progress(_ context.Context, p *mcp.ProgressNotificationParams) error {
	msg, err := notification("notifications/progress", p)
	if err != nil {
		return err
	}
	return d.st.send(msg)
}

// Log sends a log line at or above the level the client asked for: on a
// session by logging/setLevel, on 2026-07-28 in the request's _meta. A
// client that asked for none gets none, as from the SDK.
func (d *fastDown) Log(_ context.Context, p *mcp.LoggingMessageParams) error {
	level := d.level
	if d.sess != nil {
		d.sess.mu.Lock()
		level = d.sess.logLevel
		d.sess.mu.Unlock()
	}
	if level == "" || levelRank(p.Level) < levelRank(level) {
		return nil
	}
	msg, err := notification("notifications/message", p)
	if err != nil {
		return err
	}
	return d.st.send(msg)
}

// levelRank orders the protocol's log levels (RFC 5424's, least severe
// first); an unknown level ranks with debug, as the SDK ranks it.
func levelRank(l mcp.LoggingLevel) int {
	switch l {
	case "info":
		return 1
	case "notice":
		return 2
	case "warning":
		return 3
	case "error":
		return 4
	case "critical":
		return 5
	case "alert":
		return 6
	case "emergency":
		return 7
	}
	return 0
}

// refuseRequest is the answer to a request a server of a session revision
// sends in the middle of a call whose client speaks 2026-07-28. Such a
// client is asked only in a call's answer (input requests, SEP-2322),
// which the hub passes on from a 2026-07-28 server (input_rounds.go); a
// session revision's server waits for the answer inside its call, and the
// hub cannot hold that call open across the client's round trips.
func refuseRequest(method string) error {
	return fmt.Errorf("%q was not put to the client: it speaks MCP 2026-07-28, which a server asks only in its answer to a call (input requests, SEP-2322), "+
		"and this server, on a session revision, asked in the middle of its call, which the hub cannot hold open across the client's round trips; "+
		"a client on a session revision (2025-11-25) can answer it, as can this server once it speaks 2026-07-28", method)
}

func (d *fastDown) ListRoots(_ context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if d.modern {
		return nil, refuseRequest("roots/list")
	}
	var res mcp.ListRootsResult
	if err := d.ask("roots/list", p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (d *fastDown) CreateMessage(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if d.modern {
		return nil, refuseRequest("sampling/createMessage")
	}
	if p == nil {
		p = &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{}}
	}
	if p.Messages == nil {
		p2 := *p
		p2.Messages = []*mcp.SamplingMessage{}
		p = &p2
	}
	var res mcp.CreateMessageWithToolsResult
	if err := d.ask("sampling/createMessage", p, &res); err != nil {
		return nil, err
	}
	if len(res.Content) > 1 {
		return nil, fmt.Errorf("CreateMessage result has %d content blocks; use CreateMessageWithTools for multiple content", len(res.Content))
	}
	var content mcp.Content
	if len(res.Content) > 0 {
		content = res.Content[0]
	}
	return &mcp.CreateMessageResult{Meta: res.Meta, Content: content, Model: res.Model, Role: res.Role, StopReason: res.StopReason}, nil
}

// Elicit asks the client, checking what the SDK checks: that the client
// takes elicitation of the request's mode, and that an accepted answer
// fits the schema asked for.
func (d *fastDown) Elicit(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if d.modern {
		return nil, refuseRequest("elicitation/create")
	}
	if p == nil {
		return nil, fmt.Errorf("%w: params cannot be nil", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"})
	}
	if p.Mode == "" {
		p2 := *p
		p2.Mode = "form"
		if p.URL != "" || p.ElicitationID != "" {
			p2.Mode = "url"
		}
		p = &p2
	}
	caps := d.sess.caps
	if caps == nil || caps.Elicitation == nil {
		return nil, errors.New("client does not support elicitation")
	}
	switch e := caps.Elicitation; p.Mode {
	case "form":
		if e.Form == nil && e.URL != nil {
			return nil, errors.New(`client does not support "form" elicitation`)
		}
	case "url":
		if e.URL == nil {
			return nil, errors.New(`client does not support "url" elicitation`)
		}
	}
	var res mcp.ElicitResult
	if err := d.ask("elicitation/create", p, &res); err != nil {
		return nil, err
	}
	if res.Action != "accept" || res.Content == nil || p.RequestedSchema == nil {
		return &res, nil
	}
	var schema *jsonschema.Schema
	b, err := json.Marshal(p.RequestedSchema)
	if err == nil {
		err = json.Unmarshal(b, &schema)
	}
	if err != nil || schema == nil {
		return &res, err
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, err
	}
	if err := resolved.Validate(res.Content); err != nil {
		return nil, fmt.Errorf("elicitation result content does not match requested schema: %v", err)
	}
	if err := resolved.ApplyDefaults(&res.Content); err != nil {
		return nil, fmt.Errorf("failed to apply schema defaults to elicitation result: %v", err)
	}
	return &res, nil
}

var errStreamClosed = &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
	Message: "the client closed the stream of the call this request belongs to, so it cannot answer it"}

// askPrefix begins the id of every request the hub sends its client on a
// server's behalf (sampling, elicitation, roots) and matches the client's
// answer to; the SDK's own requests of the client have integer ids, so the
// two never collide. It reads like the upstream link's "crewlet-call-".
const askPrefix = "crewlet-ask-"

// ask sends a request to the client on the call's stream and waits for the
// answer the client POSTs to its session. If the call ends first, the
// client is told the request is cancelled, as the SDK tells it.
func (d *fastDown) ask(method string, params, result any) error {
	s := d.sess
	ch := make(chan json.RawMessage, 1)
	s.mu.Lock()
	s.next++
	id := strconv.Quote(askPrefix + strconv.Itoa(s.next))
	if fs := d.f.sessions.fleet; fs != nil {
		// Named for this node: the client's answer may reach another.
		id = strconv.Quote(fs.askID(s.next))
	}
	if s.asked == nil {
		s.asked = map[string]chan json.RawMessage{}
	}
	s.asked[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.asked, id)
		s.mu.Unlock()
	}()
	b := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method))
	if params != nil {
		p, err := json.Marshal(params)
		if err != nil {
			return err
		}
		b = append(append(b, `,"params":`...), p...)
	}
	if err := d.st.send(append(b, '}')); err != nil {
		return err
	}
	select {
	case <-d.stream.Done():
		// The request went out on a stream the client has closed: it
		// will never be answered, and waiting for it would hold the
		// server's call (and its flight) to the call's timeout.
		return errStreamClosed

	case raw := <-ch:
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal(raw, &resp); err != nil {
			return err
		}
		if resp.Error != nil {
			return resp.Error
		}
		return json.Unmarshal(resp.Result, result)
	case <-d.call.Done():
		if msg, err := notification("notifications/cancelled", &mcp.CancelledParams{RequestID: json.RawMessage(id), Reason: d.call.Err().Error()}); err == nil {
			_ = d.st.send(msg)
		}
		return d.call.Err()
	}
}

// answered hands a client's answer to a request a fast call made back to
// that call, and answers the POST as the SDK answers a response: 202.
func (f *operator) answered(w http.ResponseWriter, s *opSession, body []byte) bool {
	var id []byte
	var isResponse bool
	err := rawjson.Members(body, func(key, _, val []byte) error {
		switch string(key) {
		case "id":
			id = val
		case "result", "error":
			isResponse = true
		case "method":
			isResponse = false
			return rawjson.ErrSyntax
		}
		return nil
	})
	if err != nil || !isResponse || id == nil {
		return false
	}
	s.mu.Lock()
	ch, ok := s.asked[string(id)]
	s.mu.Unlock()
	if !ok {
		if f.sessions.fleet == nil {
			return false
		}
		ours, err := f.sessions.fleet.forward(s, id, body)
		switch {
		case !ours:
			return false
		case err != nil:
			// Said, not swallowed: a client told 202 would think the
			// server has its answer, and the call would wait it out.
			http.Error(w, "This hub node could not pass your answer on to the node that asked for it: send it again.",
				http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
		return true
	}
	select {
	case ch <- json.RawMessage(append([]byte(nil), body...)):
	default:
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// noteCancel ends the fast calls the client cancels, reading the body as
// the SDK reads it (cancelledIDs): escapes resolved, keys matched exactly,
// an id of 5.0 the call 5. It reports whether it ended one.
func (f *operator) noteCancel(s *opSession, ids []jsonrpc.ID) bool {
	ended := false
	for _, id := range ids {
		s.mu.Lock()
		cancel := s.calls[id]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
			ended = true
		}
	}
	return ended
}

// noteInitialized marks a session initialized when its client's
// notifications/initialized arrives, not when the SDK gets to it: the SDK
// handles a session's messages in the order they came, so a call POSTed
// after it is one the SDK would take as initialized too, and the fast path
// need not leave the session's first call to the SDK. The notification is
// read as the SDK reads it, so one the SDK refuses marks nothing.
func noteInitialized(s *opSession, reqs []*jsonrpc.Request) {
	for _, req := range reqs {
		if req.Method == "notifications/initialized" {
			s.mu.Lock()
			s.initialized = true
			s.mu.Unlock()
			return
		}
	}
}
