//lint:file-ignore SA1019 the rig's clients answer sampling and roots requests, deprecated in 2026-07-28 (SEP-2577) but still sent on the session revisions.

package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Requests of the client in FuzzTransparency: a scripted server may ask
// its client something (sampling/createMessage, elicitation/create,
// roots/list) between the notes of its answer. On a session revision the
// request goes out on the call's own stream (an event of the response to
// the call's POST, a line of a stdio server), and the server waits for
// the client's answer (a POST of its own, a line on its stdin) before it
// goes on. On 2026-07-28 the same requests are the input requests of a
// first answer (resultType input_required, SEP-2322), and the script's
// answer goes to the call that carries their answers. The clients answer
// deterministically from what they were asked (a digest of it), so the
// answer the server got shows any change in the request the client saw;
// the comparison covers what each client was asked and what the server
// got back.

// isRequest tells a request of the client from a note.
func isRequest(method string) bool { return !strings.HasPrefix(method, "notifications/") }

// asks counts the script's requests of the client.
func (sc *script) asks() int {
	n := 0
	for _, s := range sc.notes {
		if isRequest(s.method) {
			n++
		}
	}
	return n
}

// firstAsk is the index of the script's first request, len(notes) if none:
// on 2026-07-28 the notes before it come with the first answer, the rest
// with the last.
func (sc *script) firstAsk() int {
	for i, s := range sc.notes {
		if isRequest(s.method) {
			return i
		}
	}
	return len(sc.notes)
}

// askID is the id of the script's request i on the call with key.
func askID(key string, i int) string { return strconv.Quote("ask-" + key + "-" + strconv.Itoa(i)) }

// askMessage is a request as a session revision's server writes it.
func askMessage(id string, n note) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + n.method + `"`)
	if n.params != nil {
		b = append(append(b, `,"params":`...), n.params...)
	}
	return append(b, '}')
}

// inputRequired is a 2026-07-28 server's first answer to a call whose
// script asks: its requests as the result's input requests, and a request
// state the call that answers them must echo.
func (sc *script) inputRequired(key string) []byte {
	b := []byte(`{"resultType":"input_required","inputRequests":{`)
	k := 0
	for _, n := range sc.notes {
		if !isRequest(n.method) {
			continue
		}
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `"r`+strconv.Itoa(k)+`":{"method":"`+n.method+`"`...)
		if n.params != nil {
			b = append(append(b, `,"params":`...), n.params...)
		}
		b = append(b, '}')
		k++
	}
	b = append(b, `},"requestState":`...)
	return append(appendString(b, "state-"+key), '}')
}

// inputsGot is what a 2026-07-28 server got back from the call that
// answers its input requests: each answer by the request's key, in the
// keys' order, and the request state echoed.
func inputsGot(call *callOf) []any {
	var responses map[string]json.RawMessage
	_ = json.Unmarshal(call.Params.InputResponses, &responses)
	keys := make([]string, 0, len(responses))
	for k := range responses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []any
	for _, k := range keys {
		out = append(out, map[string]any{"key": k, "result": canonical(responses[k])})
	}
	// The state is the call's own (its key): what is compared is that it
	// came back as it went.
	state := call.Params.RequestState
	if state == "state-"+call.Params.Arguments.Key {
		state = "echoed"
	}
	return append(out, map[string]any{"requestState": state})
}

// gotOf is the answer a server got to a request: its result, or its
// error; nil for something that is no response.
func gotOf(raw []byte) any {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return map[string]any{"unreadable": string(raw)}
	}
	if r.Error != nil {
		return map[string]any{"error": canonical(r.Error)}
	}
	return map[string]any{"result": canonical(r.Result)}
}

// unanswered is what a server records for a request no answer came to
// within awaitAnswer: a hub that lost one shows so.
var unanswered = map[string]any{"unanswered": true}

// awaitAnswer bounds a scripted server's wait for a client's answer.
const awaitAnswer = 20 * time.Second

// asksHTTP is a streamable HTTP server's side of its requests: the answers
// it waits for, by the request's id, and what it got back, by the call's
// key.
type asksHTTP struct {
	mu      sync.Mutex
	waiting map[string]chan []byte
	got     map[string][]any
}

// take hands a POSTed JSON-RPC response to the request waiting for it, and
// reports whether one was.
func (a *asksHTTP) take(w http.ResponseWriter, body []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != nil || msg.ID == nil {
		return false
	}
	a.mu.Lock()
	ch := a.waiting[string(msg.ID)]
	delete(a.waiting, string(msg.ID))
	a.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- body
	w.WriteHeader(http.StatusAccepted)
	return true
}

// expect readies the wait for the answer to the request id.
func (a *asksHTTP) expect(id string) chan []byte {
	ch := make(chan []byte, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = map[string]chan []byte{}
	}
	a.waiting[id] = ch
	return ch
}

// await waits for the answer on ch, recording it for the call with key;
// false when the call's client hung up.
func (a *asksHTTP) await(ctx context.Context, key, id string, ch chan []byte) bool {
	t := time.NewTimer(awaitAnswer)
	defer t.Stop()
	var got any
	ok := true
	select {
	case raw := <-ch:
		got = gotOf(raw)
	case <-t.C:
		got = unanswered
	case <-ctx.Done():
		got, ok = unanswered, false
	}
	a.mu.Lock()
	delete(a.waiting, id)
	a.record(key, got)
	a.mu.Unlock()
	return ok
}

// record keeps what the call with key got back; a.mu held.
func (a *asksHTTP) record(key string, got ...any) {
	if a.got == nil {
		a.got = map[string][]any{}
	}
	a.got[key] = append(a.got[key], got...)
}

func (a *asksHTTP) gotFor(key string) []any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[key]
}

func (a *asksHTTP) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.got, key)
}

// askedSeen gathers the requests a client was asked: method and params as
// the client's handler read them, and the digest its answer echoes.
type askedSeen struct {
	mu    sync.Mutex
	asked []askSeen
}

type askSeen struct {
	method string
	params any
	digest string
}

// note records a request and answers the digest the client's answer
// echoes.
func (s *askedSeen) note(method string, params any) string {
	b, err := json.Marshal(params)
	var v any = "unencodable"
	if err == nil {
		v = canonical(b)
	}
	sum := sha256.Sum256(append([]byte(method+"\n"), b...))
	digest := "digest-" + hex.EncodeToString(sum[:8])
	s.mu.Lock()
	s.asked = append(s.asked, askSeen{method: method, params: v, digest: digest})
	s.mu.Unlock()
	return digest
}

func (s *askedSeen) take() []askSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.asked
	s.asked = nil
	return out
}

// rigRoots are the roots every rig client has: what a roots/list request
// is answered with.
var rigRoots = []*mcp.Root{{URI: "file:///srv/project-alpha", Name: "alpha ☃"}, {URI: "file:///srv/b"}}

// answering gives a client's options its answers to a server's requests:
// a sampling request is answered with a message whose text is the digest
// of what was asked; an elicitation is accepted with the digest as its
// answer where the form asks for a string "answer", else declined with the
// digest in its _meta.
func answering(opts *mcp.ClientOptions, seen *askedSeen) {
	// Every kind of elicitation: a URL one, too, reaches the handler
	// through a hub that holds the client to what it declared.
	opts.Capabilities = &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	opts.CreateMessageHandler = func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		digest := seen.note("sampling/createMessage", req.Params)
		return &mcp.CreateMessageResult{Role: "assistant", Model: "echo", StopReason: "endTurn",
			Content: &mcp.TextContent{Text: digest}}, nil
	}
	opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		digest := seen.note("elicitation/create", req.Params)
		if schema, ok := req.Params.RequestedSchema.(map[string]any); ok {
			props, _ := schema["properties"].(map[string]any)
			answer, _ := props["answer"].(map[string]any)
			if answer["type"] == "string" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": digest}}, nil
			}
		}
		return &mcp.ElicitResult{Action: "decline", Meta: mcp.Meta{"echo": digest}}, nil
	}
}

// recordRoots records a session revision's roots/list as asked: the SDK
// answers it from the client's roots, without a handler.
func recordRoots(seen *askedSeen) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				seen.note(method, req.GetParams())
			}
			return next(ctx, method, req)
		}
	}
}

// askedView is what a client was asked, and got what the server got back,
// with each digest of an asked request written as that request's place
// ("asked#i"), so an answer compares by what it answers.
func askedView(asked []askSeen, got []any) ([]map[string]any, []any) {
	var av []map[string]any
	where := map[string]string{}
	for i, a := range asked {
		if a.method != "roots/list" {
			// roots/list carries nothing to echo: the client answers
			// its roots.
			if _, dup := where[a.digest]; !dup {
				where[a.digest] = "asked#" + strconv.Itoa(i)
			}
		}
		av = append(av, map[string]any{"method": a.method, "params": a.params})
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if p, ok := where[x]; ok {
				return p
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	for i := range got {
		got[i] = walk(got[i])
	}
	return av, got
}

// dropAsked drops the asked request i, renumbering the places the got
// answers name.
func (v *view) dropAsked(i int) {
	v.Asked = slices.Delete(v.Asked, i, i+1)
	v.renumber(func(j int) int {
		if j > i {
			return j - 1
		}
		return j
	})
}

// renumber rewrites each "asked#j" in Got as "asked#"+to(j).
func (v *view) renumber(to func(int) int) {
	var walk func(x any) any
	walk = func(x any) any {
		switch y := x.(type) {
		case string:
			if rest, ok := strings.CutPrefix(y, "asked#"); ok {
				if j, err := strconv.Atoi(rest); err == nil {
					return "asked#" + strconv.Itoa(to(j))
				}
			}
		case []any:
			for i := range y {
				y[i] = walk(y[i])
			}
		case map[string]any:
			for k := range y {
				y[k] = walk(y[k])
			}
		}
		return x
	}
	for i := range v.Got {
		v.Got[i] = walk(v.Got[i])
	}
}

// sortAsked puts what a client was asked in one order: a 2026-07-28
// server's input requests come in a map, and a client fulfils them in no
// order of its own.
func (v *view) sortAsked() {
	idx := make([]int, len(v.Asked))
	keys := make([]string, len(v.Asked))
	for i := range idx {
		idx[i] = i
		b, _ := json.Marshal(v.Asked[i])
		keys[i] = string(b)
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	pos := make([]int, len(idx))
	sorted := make([]map[string]any, len(idx))
	for at, i := range idx {
		pos[i] = at
		sorted[at] = v.Asked[i]
	}
	v.Asked = sorted
	v.renumber(func(j int) int {
		if j < len(pos) {
			return pos[j]
		}
		return j
	})
}

// askWalk visits every text of a request's params the redaction rules
// cover, keys included, as textWalk does a result's: the binary payload
// of an image or audio item, a content item's type and an elicitation's
// id (the client's to echo) pass as they are.
func askWalk(a map[string]any, fn func(string) (string, error)) error {
	params, ok := a["params"].(map[string]any)
	if !ok {
		return nil
	}
	keep := map[string]any{}
	for _, k := range []string{"elicitationId", "maxTokens", "temperature", "includeContext"} {
		if v, had := params[k]; had {
			keep[k] = v
			delete(params, k)
		}
	}
	msgs, _ := params["messages"].([]any)
	delete(params, "messages")
	err := textWalk(params, fn)
	for k, v := range keep {
		params[k] = v
	}
	if msgs != nil {
		params["messages"] = msgs
	}
	for _, m := range msgs {
		msg, _ := m.(map[string]any)
		if msg == nil {
			continue
		}
		if role, ok := msg["role"].(string); ok && err == nil {
			msg["role"], err = fn(role)
		}
		if c, ok := msg["content"].(map[string]any); ok && err == nil {
			holder := map[string]any{"content": []any{c}}
			err = textWalk(holder, fn)
		}
	}
	return err
}

// askMetaMaps visits the _meta objects of what a client was asked.
func askMetaMaps(v *view, fn func(m map[string]any)) {
	for _, a := range v.Asked {
		params, _ := a["params"].(map[string]any)
		if m, ok := params["_meta"].(map[string]any); ok {
			fn(m)
		}
		msgs, _ := params["messages"].([]any)
		for _, msg := range msgs {
			mm, _ := msg.(map[string]any)
			if c, ok := mm["content"].(map[string]any); ok {
				if m, ok := c["_meta"].(map[string]any); ok {
					fn(m)
				}
			}
		}
	}
}

// scriptAsks are the script's requests in order, with their params as
// written.
func (sc *script) scriptAsks() []note {
	var out []note
	for _, n := range sc.notes {
		if isRequest(n.method) {
			out = append(out, n)
		}
	}
	return out
}

// gotError is the message of a got answer that is an error, "" if none.
func gotError(g any) string {
	m, _ := g.(map[string]any)
	e, ok := m["error"].(map[string]any)
	if !ok {
		return ""
	}
	s, _ := e["message"].(string)
	if s == "" {
		s = fmt.Sprint(e)
	}
	return s
}

// paramsHold reports a request whose params, as written, hold binary text
// (a NUL, bytes that are not UTF-8 are read as U+FFFD by every side).
func paramsHold(n note) bool { return bytes.Contains(n.params, []byte(`\u0000`)) }

// onlyNotes are the script's notifications, without its requests.
func (sc *script) onlyNotes() []note {
	if sc == nil {
		return nil
	}
	var out []note
	for _, n := range sc.notes {
		if !isRequest(n.method) {
			out = append(out, n)
		}
	}
	return out
}

// on keeps, of what a client of server s was asked, what every client
// can tell: a 2026-07-28 client answers the input request roots/list from
// its roots with no handler or middleware of its own to see it by, so
// roots/list asked of a client of a 2026-07-28 server is not compared
// (what the server got back still is).
func (o outcome) on(s *rigServer) outcome {
	if s.modern {
		o.asked = slices.DeleteFunc(o.asked, func(a askSeen) bool { return a.method == "roots/list" })
	}
	return o
}
