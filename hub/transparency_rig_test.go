//lint:file-ignore SA1019 the rig plays clients of the session revisions, which still ask for log lines.

package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rig of FuzzTransparency: third-party servers whose answer to a
// tools/call is bytes a test decides, a hub that has them as mcp_servers
// entries, and client sessions that call them directly and through the
// hub's /operator/mcp. It is built once per fuzz target and reused by
// every input: each call names, in its one argument, the script its server
// answers it with.

// transparencySecret is the value of a ${VAR} the company file references
// (the scripted servers' API key header): a configured secret the hub
// redacts wherever an upstream writes it. The operator token of Ada
// (adaTok) is another.
const transparencySecret = "tr-secret-8c1f4e27d9"

// script is one scripted answer to a tools/call: the JSON-RPC response's
// result or error member as its bytes, optionally on an event stream with
// notifications before it.
type script struct {
	sse    bool
	notes  []note
	member string // "result" or "error"
	body   []byte // that member's value, as the server writes it
	// cut breaks the server's connection half way through the response,
	// after the notes: an HTTP stream closed mid-event, a stdio server
	// that exits mid-line.
	cut bool
	// stdio is set on the copy sent to a stdio server, whose broken
	// answer ends its process; an HTTP server's breaks only the call's
	// connection.
	stdio bool
	// hold makes a streamable HTTP server whose request the client did
	// not answer with a result give no answer at all: it waits for the
	// hub to give up on the call (transparency_spell_test.go), so a call
	// the client cancelled ends the one way, whoever is quicker.
	hold bool
}

// note is a notification the server sends on the call's stream before its
// answer.
type note struct {
	method string // notifications/message or notifications/progress
	// params is the notification's params, as written; for progress, the
	// members after the progress token (the call's own, filled in when the
	// call comes).
	params []byte
}

// endOfNotes is the message of the progress notification a scripted server
// sends after a streamed answer's notes, just before the response. A
// client's handlers get notifications one at a time in the order they came,
// so once a client has this one, every note of the call it will get is in:
// the rig waits for it, not for a while. A broken answer (a cut script)
// has none.
const endOfNotes = "end of the notes"

// step is a message a scripted server writes before its response: a
// notification, or a request of the client whose answer it waits for
// before it goes on (ask, the request's id).
type step struct {
	msg []byte
	ask string
}

// wire is what a scripted server writes for call, whose client asked for
// progress with its token (none: no progress): each notification and
// request of the client as a JSON-RPC message, the end of the notes last
// when the answer is streamed, and the response. On 2026-07-28 (modern) a
// script that asks is two answers: a first call is answered with the notes
// before the first request and the requests as input requests; the call
// that carries their answers with the other notes and the script's answer.
// final says the answer is the script's, which a cut script breaks.
func (sc *script) wire(call *callOf, streamed, modern bool) (steps []step, resp []byte, final bool) {
	id, token, key := call.ID, call.Params.Meta.ProgressToken, call.Params.Arguments.Key
	progress := func(members []byte) []byte {
		params := append(append([]byte(`{"progressToken":`), token...), ',')
		return append(params, members...)
	}
	notes := sc.notes
	final = true
	if modern && sc.asks() > 0 {
		if len(call.Params.InputResponses) == 0 {
			notes, final = notes[:sc.firstAsk()], false
		} else {
			notes = notes[sc.firstAsk():]
		}
	}
	if streamed {
		for i, n := range notes {
			params := n.params
			switch {
			case isRequest(n.method):
				if !modern {
					id := askID(key, i)
					steps = append(steps, step{msg: askMessage(id, n), ask: id})
				}
				continue
			case n.method == "notifications/progress":
				if len(token) == 0 {
					continue // nobody asked for progress
				}
				params = progress(n.params)
			}
			steps = append(steps, step{msg: []byte(`{"jsonrpc":"2.0","method":"` + n.method + `","params":` + string(params) + `}`)})
		}
		// A broken answer has no end of its notes: both sides drain what
		// they read instead.
		if len(token) > 0 && final && !sc.cut {
			steps = append(steps, step{msg: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":` +
				string(progress([]byte(`"progress":100,"total":100,"message":"`+endOfNotes+`"}`))) + `}`)})
		}
	}
	member, body := sc.member, sc.body
	if !final {
		member, body = "result", sc.inputRequired(key)
	}
	resp = make([]byte, 0, len(body)+64)
	resp = append(resp, `{"jsonrpc":"2.0","id":`...)
	resp = append(resp, id...)
	resp = append(resp, `,"`+member+`":`...)
	resp = append(resp, body...)
	resp = append(resp, '}')
	return steps, resp, final
}

// callOf reads what a scripted server needs of a tools/call: its id, tool,
// key and progress token.
type callOf struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Key string `json:"key"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
		// A 2026-07-28 call's answers to the input requests of the
		// answer to the call before, and the request state it echoes.
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   string          `json:"requestState"`
	} `json:"params"`
}

// scripted is a scripted server as the rig drives it: it files the script
// a call with key is answered by, tells what the server got back to its
// requests of the client while it answered, and forgets both.
type scripted interface {
	set(key string, sc *script)
	got(key string) []any
	drop(key string)
}

// newScriptedMCP is the go-sdk server behind every scripted server: it
// serves the handshake, the tool list and everything but the scripted
// answers. A modern one speaks 2026-07-28, the other the session
// revisions.
func newScriptedMCP(tool string, modern bool) *mcp.Server {
	opts := &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25", "2025-06-18"}}
	if modern {
		// 2026-07-28 alone: a server that also speaks a session revision
		// is linked on that one.
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "scripted-" + tool, Version: "0"}, opts)
	s.AddTool(&mcp.Tool{Name: tool, Description: "answers as the test scripted",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Never reached: every call is answered by the script.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "unscripted"}}}, nil
		})
	return s
}

// scriptedServer is a go-sdk server over streamable HTTP whose one tool's
// calls are answered by the test, byte for byte: the SDK serves the
// handshake, the tool list and everything else, so only the answer under
// test is written by hand.
type scriptedServer struct {
	url     string
	tool    string
	modern  bool
	mu      sync.Mutex
	scripts map[string]*script
	asks    asksHTTP
}

// startScripted serves a scripted server. A modern one is stateless and
// speaks 2026-07-28 (the SDK serves that revision statelessly only), and
// the hub links to it on that revision; the other keeps sessions of the
// session revisions alone, so the hub links to it on 2025-11-25.
func startScripted(tb testing.TB, tool string, modern bool) *scriptedServer {
	tb.Helper()
	s := newScriptedMCP(tool, modern)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: modern})
	g := &scriptedServer{tool: tool, modern: modern, scripts: map[string]*script{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if g.asks.take(w, body) || g.answer(w, r, body) {
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	g.url = srv.URL + "/"
	return g
}

// set files the script a call with key is answered by.
func (g *scriptedServer) set(key string, sc *script) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scripts[key] = sc
}

func (g *scriptedServer) got(key string) []any { return g.asks.gotFor(key) }

func (g *scriptedServer) drop(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.scripts, key)
	g.asks.forget(key)
}

// answer writes the scripted answer to a tools/call with a key it has a
// script for, and reports whether it did.
func (g *scriptedServer) answer(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var msg callOf
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != g.tool {
		return false
	}
	key := msg.Params.Arguments.Key
	g.mu.Lock()
	sc := g.scripts[key]
	g.mu.Unlock()
	if sc == nil {
		return false
	}
	steps, resp, final := sc.wire(&msg, sc.sse, g.modern)
	if g.modern && final && sc.asks() > 0 {
		g.asks.mu.Lock()
		g.asks.record(key, inputsGot(&msg)...)
		g.asks.mu.Unlock()
	}
	cut := sc.cut && final
	if !sc.sse {
		w.Header().Set("Content-Type", "application/json")
		if cut {
			cutAfter(w, resp[:len(resp)/2])
			return true
		}
		_, _ = w.Write(resp)
		return true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	for _, s := range steps {
		var answered chan []byte
		if s.ask != "" {
			answered = g.asks.expect(s.ask)
		}
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", s.msg)
		_ = rc.Flush()
		if answered != nil && !g.asks.await(r.Context(), key, s.ask, answered) {
			return true // the client hung up
		}
		if answered != nil && sc.hold && !answeredResult(g.asks.gotFor(key)) {
			// Bounded, so a hub that never gives up fails the input
			// with a broken answer rather than hangs it.
			t := time.NewTimer(awaitAnswer)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
			return true
		}
	}
	if cut {
		cutAfter(w, append([]byte("event: message\ndata: "), resp[:len(resp)/2]...))
		return true
	}
	_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", resp)
	return true
}

// answeredResult says the last request a server made was answered with a
// result.
func answeredResult(got []any) bool {
	if len(got) == 0 {
		return false
	}
	m, ok := got[len(got)-1].(map[string]any)
	_, result := m["result"]
	return ok && result
}

// cutAfter writes part of an answer and closes the connection under it, as
// a server that died mid-answer leaves it: the answer's body ends without
// its end.
func cutAfter(w http.ResponseWriter, part []byte) {
	rc := http.NewResponseController(w)
	_, _ = w.Write(part)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// transparencyRig is everything FuzzTransparency calls.
type transparencyRig struct {
	hub     *Hub
	servers []*rigServer
	viaHub  []*rigClient // one per revision a client speaks to the hub
	// endpoint is the hub's /operator/mcp, for the raw client that writes
	// spellings no go-sdk client writes (transparency_spell_test.go).
	endpoint string
	raw      *rawClient
}

// rigServer is one scripted server, the hub's mcp_servers entry for it,
// and a client of it alone.
type rigServer struct {
	name, tool string // its entry's name, its tool's
	scripts    scripted
	direct     *rigClient
	stdio      bool
	modern     bool // linked on 2026-07-28, not on a session revision
}

// streamed says an answer of the script comes on a stream: every stdio
// answer does.
func (s *rigServer) streamed(sc *script) bool { return s.stdio || sc.sse }

// instance is the hub's link to the server.
func (rig *transparencyRig) instance(name string) *upstream.Instance {
	rig.hub.servers.mu.Lock()
	defer rig.hub.servers.mu.Unlock()
	return rig.hub.servers.byName[name].inst
}

// linksUp checks the hub's links to the scripted servers are up after a
// call through the hub began at since: a server's answer, whatever it
// holds, must never take the link down, but for a stdio server whose
// process ended mid-answer (cut: a cut script the hub got to the end of),
// which the hub must bring back.
// A link that went down is restarted at once (as a reload does), so the
// next call is judged on its own.
func (rig *transparencyRig) linksUp(t *testing.T, called *rigServer, cut bool, since time.Time, revision string, fast bool) {
	t.Helper()
	for _, s := range rig.servers {
		inst := rig.instance(s.name)
		if s == called && s.stdio && cut {
			rig.restarted(t, s.name, since)
			continue
		}
		if st := inst.Status(); st.State != upstream.StateRunning {
			t.Errorf("%s, a %s client through the hub (fast=%v): the answer took the hub's link to %q down: %s (%s)",
				called.tool, revision, fast, s.name, st.State, st.Cause)
			rig.hub.servers.reconcile(rig.hub.Company())
			rig.restarted(t, s.name, time.Time{})
		}
	}
}

// restarted waits until the hub has the server's link up again after a
// death no earlier than since. The hub restarts a server that died at once
// the first time, later ones after a wait; the operator's retry (MCP-9)
// skips that wait, so every input finds the server up.
func (rig *transparencyRig) restarted(t *testing.T, name string, since time.Time) {
	t.Helper()
	inst := rig.instance(name)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := inst.Status()
		if st.State == upstream.StateRunning && st.Since.After(since) {
			return
		}
		if st.State == upstream.StateDown {
			inst.Retry()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub's link to %q did not come back: %s (%s)", name, st.State, st.Cause)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newTransparencyRig starts the scripted servers (over streamable HTTP and
// stdio, each linked on a session revision and on 2026-07-28), a hub with
// them as mcp_servers entries, and the client sessions.
func newTransparencyRig(tb testing.TB) *transparencyRig {
	tb.Helper()
	rig := &transparencyRig{}
	session := startScripted(tb, "scripted_session", false)
	modern := startScripted(tb, "scripted_modern", true)
	rig.servers = []*rigServer{
		{name: "session", tool: session.tool, scripts: session},
		{name: "modern", tool: modern.tool, scripts: modern, modern: true},
		newStdioScripted(tb, "stdio_session", "scripted_stdio_session", false),
		newStdioScripted(tb, "stdio_modern", "scripted_stdio_modern", true),
	}
	doc := testCompany + "mcp_servers:\n" +
		fmt.Sprintf("  - {name: session, url: %q, headers: {X-Api-Key: \"${UP_KEY}\"}}\n", session.url) +
		fmt.Sprintf("  - {name: modern, url: %q}\n", modern.url)
	for _, s := range rig.servers[2:] {
		doc += s.scripts.(*stdioScripted).entry(s.name)
	}
	co, err := config.Parse([]byte(doc))
	if err != nil {
		tb.Fatalf("%s\n%v", doc, err)
	}
	env := map[string]string{"ADA_TOKEN": adaTok, "CI_TOKEN": "ci-token-123456", "UP_KEY": transparencySecret}
	ev := logEvents{ch: make(chan slog.Record, 4096)}
	h, err := New(context.Background(), Options{
		Company: co, Logger: slog.New(ev),
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		tb.Fatal(err)
	}
	front := httptest.NewServer(h.Handler())
	tb.Cleanup(func() { h.Close(); front.Close() })
	rig.hub = h
	rig.endpoint = front.URL + "/operator/mcp"
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range rig.servers {
		for {
			if _, ok := h.company.Get(s.tool); ok {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("the hub did not file the tool of %q", s.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Each server is linked on the revision it is there for: the hub
	// says so as it shakes hands.
	linked := map[string]string{}
	for len(ev.ch) > 0 {
		if r := <-ev.ch; r.Message == "server_handshake" {
			var server, session string
			r.Attrs(func(a slog.Attr) bool {
				switch a.Key {
				case "server":
					server = a.Value.String()
				case "session":
					session = a.Value.String()
				}
				return true
			})
			linked[server] = session
		}
	}
	for _, s := range rig.servers {
		if want := strconv.FormatBool(!s.modern); linked[s.name] != want {
			tb.Fatalf("the hub linked %q with session=%q, not %s", s.name, linked[s.name], want)
		}
	}
	rig.servers[0].direct = dialRig(tb, session.url, "", "2025-11-25")
	rig.servers[1].direct = dialRig(tb, modern.url, "", "2026-07-28")
	for _, s := range rig.servers[2:] {
		st := s.scripts.(*stdioScripted)
		rev := "2025-11-25"
		if st.modern {
			rev = "2026-07-28"
		}
		s.direct = dialWith(tb, rev, st.command)
	}
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		rig.viaHub = append(rig.viaHub, dialRig(tb, front.URL+"/operator/mcp", adaTok, rev))
	}
	return rig
}
