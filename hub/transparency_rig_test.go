//lint:file-ignore SA1019 the rig plays clients of the session revisions, which still ask for log lines.

package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// scriptedServer is a go-sdk server over streamable HTTP whose one tool's
// calls are answered by the test, byte for byte: the SDK serves the
// handshake, the tool list and everything else, so only the answer under
// test is written by hand.
type scriptedServer struct {
	url     string
	tool    string
	mu      sync.Mutex
	scripts map[string]*script
}

// startScripted serves a scripted server. A modern one is stateless and
// speaks 2026-07-28 (the SDK serves that revision statelessly only), and
// the hub links to it on that revision; the other keeps sessions of the
// session revisions alone, so the hub links to it on 2025-11-25.
func startScripted(tb testing.TB, tool string, modern bool) *scriptedServer {
	tb.Helper()
	opts := &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25", "2025-06-18"}}
	if modern {
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28", "2025-11-25"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "scripted-" + tool, Version: "0"}, opts)
	s.AddTool(&mcp.Tool{Name: tool, Description: "answers as the test scripted",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Never reached: every call is answered by the script.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "unscripted"}}}, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: modern})
	g := &scriptedServer{tool: tool, scripts: map[string]*script{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if g.answer(w, body) {
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

func (g *scriptedServer) drop(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.scripts, key)
}

// answer writes the scripted answer to a tools/call with a key it has a
// script for, and reports whether it did.
func (g *scriptedServer) answer(w http.ResponseWriter, body []byte) bool {
	var msg struct {
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
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || msg.Params.Name != g.tool {
		return false
	}
	g.mu.Lock()
	sc := g.scripts[msg.Params.Arguments.Key]
	g.mu.Unlock()
	if sc == nil {
		return false
	}
	resp := make([]byte, 0, len(sc.body)+64)
	resp = append(resp, `{"jsonrpc":"2.0","id":`...)
	resp = append(resp, msg.ID...)
	resp = append(resp, `,"`+sc.member+`":`...)
	resp = append(resp, sc.body...)
	resp = append(resp, '}')
	if !sc.sse {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
		return true
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	event := func(data []byte) {
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
		if fl != nil {
			fl.Flush()
		}
	}
	for _, n := range sc.notes {
		params := n.params
		if n.method == "notifications/progress" {
			if len(msg.Params.Meta.ProgressToken) == 0 {
				continue // nobody asked for progress
			}
			params = append(append([]byte(`{"progressToken":`), msg.Params.Meta.ProgressToken...), ',')
			params = append(params, n.params...)
		}
		event([]byte(`{"jsonrpc":"2.0","method":"` + n.method + `","params":` + string(params) + `}`))
	}
	event(resp)
	return true
}

// notesSeen gathers the notifications a client session received, as JSON
// the comparison reads.
type notesSeen struct {
	mu    sync.Mutex
	notes []map[string]any
	more  chan struct{} // signalled on each arrival
}

func newNotesSeen() *notesSeen { return &notesSeen{more: make(chan struct{}, 1)} }

func (s *notesSeen) add(method string, params any) {
	b, err := json.Marshal(params)
	var v any
	if err == nil {
		v = canonical(b)
	} else {
		v = "unencodable: " + err.Error()
	}
	s.mu.Lock()
	s.notes = append(s.notes, map[string]any{"method": method, "params": v})
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// take waits until n notifications arrived (or within passed), and grace
// longer where more may come, then answers and forgets what arrived. The
// notifications of a call come on its stream before its answer, but the
// SDK hands them to the handlers on its own goroutine, so they may still be
// on their way when the answer is back.
func (s *notesSeen) take(n int, within, grace time.Duration) []map[string]any {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		have := len(s.notes)
		s.mu.Unlock()
		if have >= n {
			break
		}
		select {
		case <-s.more:
		case <-deadline.C:
			n = 0
		}
	}
	if grace > 0 {
		// Notifications the hub may pass or drop: wait for any of them
		// that will come, so none is taken for the next call's.
		wait := time.NewTimer(grace)
		defer wait.Stop()
		for done := false; !done; {
			select {
			case <-s.more:
			case <-wait.C:
				done = true
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.notes
	s.notes = nil
	return out
}

// rigClient is a client session and what it was told.
type rigClient struct {
	cs                        *mcp.ClientSession
	seen                      *notesSeen
	endpoint, token, revision string
}

// dialRig connects a go-sdk client on revision to endpoint, presenting
// token when one is given, asking for every log line.
func dialRig(tb testing.TB, endpoint, token, revision string) *rigClient {
	tb.Helper()
	c := &rigClient{endpoint: endpoint, token: token, revision: revision}
	c.dial(tb)
	return c
}

// dial opens the client's session. The SDK's client ends its session on
// an answer it cannot read, so a call that failed so is followed by a new
// one.
func (c *rigClient) dial(tb testing.TB) {
	tb.Helper()
	endpoint, token, revision := c.endpoint, c.token, c.revision
	seen := newNotesSeen()
	client := mcp.NewClient(&mcp.Implementation{Name: "transparency", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			seen.add("notifications/progress", req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			seen.add("notifications/message", req.Params)
		},
	})
	hc := http.DefaultClient
	if token != "" {
		hc = hubtest.Client(token)
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		tb.Fatalf("connect %s on %s: %v", endpoint, revision, err)
	}
	if revision < "2026-07-28" {
		if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			tb.Fatalf("logging level on %s: %v", endpoint, err)
		}
	}
	if c.cs != nil {
		_ = c.cs.Close()
	} else {
		tb.Cleanup(func() { _ = c.cs.Close() })
	}
	c.cs, c.seen = cs, seen
}

// callKeys makes every call's key unique across the rig's life.
var callKeys atomic.Int64

// outcome is what a client made of one call: a result, or the error the
// call failed with, and the notifications that came while it ran.
type outcome struct {
	res   *mcp.CallToolResult
	err   error
	notes []map[string]any
}

// ownNotes keeps the notifications of the call whose progress token is
// token: a log line, or progress with that token. The token, the client's
// own and different for each call, is written as "own".
func ownNotes(notes []map[string]any, token string) []map[string]any {
	var out []map[string]any
	for _, n := range notes {
		if params, ok := n["params"].(map[string]any); ok && n["method"] == "notifications/progress" {
			if params["progressToken"] != token {
				continue
			}
			params["progressToken"] = "own"
		}
		out = append(out, n)
	}
	return out
}

// call runs tool with the script and waits for the notes it expects, and
// for grace longer where the script holds notes that may or may not come.
func (c *rigClient) call(tb testing.TB, g *scriptedServer, tool string, sc *script, wantNotes int, grace time.Duration) outcome {
	tb.Helper()
	key := "k" + strconv.FormatInt(callKeys.Add(1), 10)
	g.set(key, sc)
	defer g.drop(key)
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"key": key}}
	// A token of the call's own, so a progress notification late for
	// one call is never taken for the next's.
	params.SetProgressToken("progress-" + key)
	if c.revision >= "2026-07-28" {
		// A 2026-07-28 client asks for log lines in the request itself.
		params.Meta[mcp.MetaKeyLogLevel] = "debug"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, params)
	// The answer is back: every notification the client will be given is
	// on its way, so a short wait past the expected count only bounds a
	// hub that lost one.
	o := outcome{res: res, err: err, notes: ownNotes(c.seen.take(wantNotes, 2*time.Second, grace), "progress-"+key)}
	var wire *jsonrpc.Error
	if err != nil && !errors.As(err, &wire) {
		c.dial(tb)
	}
	return o
}

// transparencyRig is everything FuzzTransparency calls.
type transparencyRig struct {
	hub     *Hub
	servers map[string]*scriptedServer // by tool name
	direct  map[string]*rigClient      // by tool name: a client of that server alone
	viaHub  []*rigClient               // one per revision a client speaks to the hub
}

// linksUp checks the hub's links to both scripted servers are up after a
// call: a server's answer, whatever it holds, must never take the link
// down. A link that went down is restarted at once (as a reload does), so
// the next call is judged on its own.
func (rig *transparencyRig) linksUp(t *testing.T, tool, revision string, fast bool) {
	t.Helper()
	for _, name := range []string{"session", "modern"} {
		rig.hub.servers.mu.Lock()
		inst := rig.hub.servers.byName[name].inst
		rig.hub.servers.mu.Unlock()
		if st := inst.Status(); st.State != upstream.StateRunning {
			t.Errorf("%s, a %s client through the hub (fast=%v): the answer took the hub's link to %q down: %s (%s)",
				tool, revision, fast, name, st.State, st.Cause)
			rig.hub.servers.reconcile(rig.hub.Company())
			deadline := time.Now().Add(30 * time.Second)
			for inst.Status().State != upstream.StateRunning {
				if time.Now().After(deadline) {
					t.Fatalf("the hub's link to %q did not come back", name)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// The scripted servers' tools: one the hub links to on a session revision,
// one it links to on 2026-07-28.
const (
	sessionTool = "scripted_session"
	modernTool  = "scripted_modern"
)

// newTransparencyRig starts both scripted servers, a hub with both as
// mcp_servers entries, and the client sessions.
func newTransparencyRig(tb testing.TB) *transparencyRig {
	tb.Helper()
	rig := &transparencyRig{servers: map[string]*scriptedServer{}, direct: map[string]*rigClient{}}
	rig.servers[sessionTool] = startScripted(tb, sessionTool, false)
	rig.servers[modernTool] = startScripted(tb, modernTool, true)
	doc := testCompany + "mcp_servers:\n" +
		fmt.Sprintf("  - {name: session, url: %q, headers: {X-Api-Key: \"${UP_KEY}\"}}\n", rig.servers[sessionTool].url) +
		fmt.Sprintf("  - {name: modern, url: %q}\n", rig.servers[modernTool].url)
	co, err := config.Parse([]byte(doc))
	if err != nil {
		tb.Fatalf("%s\n%v", doc, err)
	}
	env := map[string]string{"ADA_TOKEN": adaTok, "CI_TOKEN": "ci-token-123456", "UP_KEY": transparencySecret}
	h, err := New(context.Background(), Options{
		Company: co,
		Env:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		tb.Fatal(err)
	}
	front := httptest.NewServer(h.Handler())
	tb.Cleanup(func() { h.Close(); front.Close() })
	rig.hub = h
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, a := h.company.Get(sessionTool)
		_, b := h.company.Get(modernTool)
		if a && b {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the hub did not file the scripted servers' tools")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rig.direct[sessionTool] = dialRig(tb, rig.servers[sessionTool].url, "", "2025-11-25")
	rig.direct[modernTool] = dialRig(tb, rig.servers[modernTool].url, "", "2026-07-28")
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		rig.viaHub = append(rig.viaHub, dialRig(tb, front.URL+"/operator/mcp", adaTok, rev))
	}
	return rig
}
