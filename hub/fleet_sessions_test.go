//lint:file-ignore SA1019 a 2025 session's log level (logging, deprecated in 2026-07-28, SEP-2577) is what a test here follows across nodes.

package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
)

// nodeSwitch is a balancer in a client's transport: it sends a session's
// POSTs to the fleet's nodes in turn and its event stream (GET) to the
// node named for it, skipping nodes marked down, and counts what each
// node answered for the session.
type nodeSwitch struct {
	nodes  []*url.URL
	stream int // the node the GETs go to

	mu   sync.Mutex
	next int
	down map[int]bool
	// served counts, per node, the session's requests it answered (those
	// carrying Mcp-Session-Id); failed lists any answered with an error
	// status.
	served map[int]int
	failed []string
	// posts are the nodes each POST went to, in order.
	posts []int
}

func (s *nodeSwitch) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	n := s.stream
	if r.Method != http.MethodGet {
		n = s.next % len(s.nodes)
		s.next++
	}
	for s.down[n] {
		n = (n + 1) % len(s.nodes)
	}
	if r.Method == http.MethodPost {
		s.posts = append(s.posts, n)
	}
	s.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = s.nodes[n].Scheme, s.nodes[n].Host
	r.Host = s.nodes[n].Host
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Header.Get("Mcp-Session-Id") != "" {
		s.mu.Lock()
		s.served[n]++
		if resp.StatusCode >= 300 {
			s.failed = append(s.failed, fmt.Sprintf("%s to node %d: %s", r.Method, n, resp.Status))
		}
		s.mu.Unlock()
	}
	return resp, err
}

func (s *nodeSwitch) markDown(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[n] = true
}

// Issue 39, build 1 (OPS-1: a session id is a handle, not a proof): a
// 2025 session opened through one node of a fleet is served by any node —
// a go-sdk client whose requests alternate between two nodes has every
// call answered, its event stream on the node that did not open it gets
// that node's catalogue change, and once the opening node is gone the
// other carries on with the same session id. An id the fleet did not
// issue, or one altered, is refused in words.
func TestFleetServesASessionOnAnyNode(t *testing.T) {
	more := hubtest.Upstream(t, &mcp.Tool{Name: "extra"})
	doc, env := twoPeople()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second,
		Env:        env,
		FirstParty: []FirstParty{{Name: "echo", New: func(tr servers.Trust, _ Deps) *mcp.Server { return hubtest.EchoServer(tr) }}},
	}, func(*testNode) {})
	var servers []*httptest.Server
	sw := &nodeSwitch{stream: 1, down: map[int]bool{}, served: map[int]int{}}
	for _, n := range nodes {
		srv := httptest.NewServer(n.hub.Handler())
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
		u, _ := url.Parse(srv.URL)
		sw.nodes = append(sw.nodes, u)
	}
	changed := make(chan struct{}, 8)
	cs, err := hubtest.DialClient(t, servers[0].URL+"/operator/mcp", &http.Client{Transport: hubtest.Bearer{Token: "ada-token-123456", Base: sw}},
		"2025-11-25", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			changed <- struct{}{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	id := cs.ID()
	call := func(text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil {
			t.Fatalf("call %q: %v", text, err)
		}
		if res.IsError || !strings.Contains(hubtest.Text(res), text) {
			t.Fatalf("call %q answered %s", text, hubtest.Text(res))
		}
	}
	for i := range 6 {
		call(fmt.Sprintf("both nodes %d", i))
	}
	sw.mu.Lock()
	served, failed := sw.served[0], sw.failed
	sw.mu.Unlock()
	if served < 3 || len(failed) > 0 {
		t.Fatalf("the opening node answered %d of the session's requests; refused: %v", served, failed)
	}

	// The event stream is on node b, which did not open the session: a
	// change of b's catalogue reaches the client there.
	eventually(t, 10*time.Second, "the session's event stream open on node b", func() (bool, string) {
		s := nodes[1].hub.operator.sessions.get(id)
		if s == nil {
			return false, "node b holds no such session"
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.streams > 0, fmt.Sprintf("%d streams", s.streams)
	})
	grown := doc.Server(fmt.Sprintf(`{name: more, url: %q}`, more)).Parse(t)
	if err := nodes[1].hub.Apply(grown); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the client's event stream on node b never got the catalogue change")
	}

	// Node a goes: the session carries on through b, under the same id.
	sw.markDown(0)
	servers[0].Close()
	nodes[0].stop()
	for i := range 4 {
		call(fmt.Sprintf("node b alone %d", i))
	}
	if cs.ID() != id {
		t.Fatalf("the session id changed from %s to %s", id, cs.ID())
	}
	sw.mu.Lock()
	failed = sw.failed
	sw.mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("requests of the session were refused: %v", failed)
	}

	// An id no node issued, and the real one altered, are refused in
	// words before anything is served.
	swap := "A"
	if id[10] == 'A' {
		swap = "B"
	}
	altered := id[:10] + swap + id[11:]
	const echo = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	for _, bad := range []string{"made-up-session", altered} {
		if status, body := sessionPOST(t, servers[1].URL, "ada-token-123456", bad, echo); status != http.StatusNotFound || !strings.Contains(body, "not issued by this hub") {
			t.Fatalf("session id %q: %d %s", bad, status, body)
		}
	}
	// The real id with another seat's credential is refused too, as the
	// SDK refuses it on the node that opened the session.
	if status, body := sessionPOST(t, servers[1].URL, "bob-token-654321", id, echo); status != http.StatusForbidden || !strings.Contains(body, "credential of another seat") {
		t.Fatalf("bob's request of ada's session on node b: %d %s", status, body)
	}
}

// Issue 39, build 1: the log level a 2025 client sets travels with its
// session. A node that takes the session up after the level was set
// through another logs at it, and a level set through one node reaches
// the copy another already holds: a server's log lines reach the client
// from either node at the level it asked for, never below.
func TestFleetSessionKeepsItsLogLevelOnEveryNode(t *testing.T) {
	up := diffUpstream(t, false, make(chan string, 64))
	doc, env := twoPeople()
	doc.Server(fmt.Sprintf(`{name: a, url: %q, tool_prefix: a_}`, up))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second, Env: env}, func(*testNode) {})
	sw := &nodeSwitch{stream: 1, down: map[int]bool{1: true}, served: map[int]int{}}
	for _, n := range nodes {
		srv := httptest.NewServer(n.hub.Handler())
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		sw.nodes = append(sw.nodes, u)
		waitTool(t, &testHub{Hub: n.hub}, "a_log")
	}
	var mu sync.Mutex
	var logs []string
	cs, err := hubtest.DialClient(t, sw.nodes[0].String()+"/operator/mcp", &http.Client{Transport: hubtest.Bearer{Token: "ada-token-123456", Base: sw}},
		"2025-11-25", &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data))
		}})
	if err != nil {
		t.Fatal(err)
	}
	id := cs.ID()
	// Set through node a alone; then node b joins in.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	// Node b, which has not seen the session, does not take it up for
	// another seat's credential.
	if status, body := sessionPOST(t, sw.nodes[1].String(), "bob-token-654321", id, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusForbidden || !strings.Contains(body, "credential of another seat") {
		t.Fatalf("bob's request of ada's session on node b: %d %s", status, body)
	}
	if nodes[1].hub.operator.sessions.get(id) != nil {
		t.Fatal("node b took the session up for bob")
	}
	sw.mu.Lock()
	delete(sw.down, 1)
	sw.mu.Unlock()
	logged := func(want int) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d log lines", want), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(logs) >= want, fmt.Sprintf("%q", logs)
		})
	}
	for i := range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_log", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("call %d: %v %s", i, err, resultJSON(t, res))
		}
		logged(i + 1)
	}
	if nodes[1].hub.operator.sessions.get(id) == nil {
		t.Fatal("node b never served the session")
	}

	// Raised through one node, the level reaches the other's copy: no
	// node sends a warning any more.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		eventually(t, 10*time.Second, "node "+n.name+" logs at error", func() (bool, string) {
			s := n.hub.operator.sessions.get(id)
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.logLevel == "error", string(s.logLevel)
		})
	}
	for i := range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_log", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("call %d at error: %v %s", i, err, resultJSON(t, res))
		}
	}
	mu.Lock()
	if len(logs) != 2 || logs[0] != logs[1] || !strings.HasPrefix(logs[0], "warning ") {
		t.Fatalf("the client got the log lines %q, want the server's warning once from each node and nothing at error", logs)
	}
	mu.Unlock()

	// The client ends the session through one node: it ends on both, and
	// neither takes it up again.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		eventually(t, 10*time.Second, "node "+n.name+" closed the session", func() (bool, string) {
			return n.hub.operator.sessions.get(id) == nil, "still held"
		})
		base := map[string]string{"a": sw.nodes[0].String(), "b": sw.nodes[1].String()}[n.name]
		if status, body := sessionPOST(t, base, "ada-token-123456", id, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusNotFound || !strings.Contains(body, "This session has ended") {
			t.Fatalf("node %s answered the ended session %d %s", n.name, status, body)
		}
	}
}

// Issue 39, build 1: a server's request to a 2025 client in the middle
// of a call (sampling, elicitation, roots) goes out from the node serving
// the call, and the client's answer, which the balancer gives the other
// node, is sent on to the node that asked: every call ends with the
// client's answer, its capabilities read from the session's record.
func TestFleetAnswersAServersRequestOnAnotherNode(t *testing.T) {
	up := diffUpstream(t, false, make(chan string, 64))
	doc := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: a, url: %q, tool_prefix: a_}`, up))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }}, func(*testNode) {})
	sw := &nodeSwitch{stream: 1, down: map[int]bool{}, served: map[int]int{}}
	for _, n := range nodes {
		srv := httptest.NewServer(n.hub.Handler())
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		sw.nodes = append(sw.nodes, u)
		waitTool(t, &testHub{Hub: n.hub}, "a_sample", "a_elicit", "a_roots")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "asked", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m-" + fmt.Sprint(len(req.Params.Messages)), Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///srv/alpha", Name: "alpha"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: sw.nodes[0].String() + "/operator/mcp",
		HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: "ada-token-123456", Base: sw}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	// The client's initialized notification reached node b alone; node a,
	// which opened the session, learns of it from the fleet.
	for _, n := range nodes {
		eventually(t, 10*time.Second, "node "+n.name+" knows the session initialized", func() (bool, string) {
			s := n.hub.operator.sessions.get(cs.ID())
			if s == nil {
				return false, "not held"
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.initialized, "not yet"
		})
	}
	for _, c := range []struct{ tool, want string }{
		{"a_sample", "sampled: m-1"}, {"a_elicit", `elicited: accept {"name":"Ada"}`}, {"a_roots", "file:///srv/alpha"},
		{"a_sample", "sampled: m-1"}, {"a_elicit", `elicited: accept {"name":"Ada"}`}, {"a_roots", "file:///srv/alpha"},
	} {
		sw.mu.Lock()
		first := len(sw.posts)
		sw.mu.Unlock()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{}})
		ccancel()
		if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), c.want) {
			sw.mu.Lock()
			t.Logf("posts %v", sw.posts[first:])
			sw.mu.Unlock()
			t.Fatalf("%s answered %v %s, want %q", c.tool, err, resultJSON(t, res), c.want)
		}
		sw.mu.Lock()
		posts := sw.posts[first:]
		sw.mu.Unlock()
		if len(posts) != 2 || posts[0] == posts[1] {
			t.Fatalf("%s: the call and the client's answer went to nodes %v, want one to each", c.tool, posts)
		}
	}
}

// initSession sends a 2025 initialize to a node with token, as a client
// opening a session does, and answers the status and the session's id.
func initSession(t *testing.T, base, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/operator/mcp", strings.NewReader(initBody))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// sessionPOST sends one 2025 request of session id to a node with token,
// and answers its status and body.
func sessionPOST(t *testing.T, base, token, id, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/operator/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// twoPeople is a company of ada and bob, each with a credential bound to
// them, and the environment holding both.
func twoPeople() (*hubtest.Company, func(string) (string, bool)) {
	doc := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Person("bob", false).Token("bobs", "BOB_TOKEN", "bob")
	env := map[string]string{"ADA_TOKEN": "ada-token-123456", "BOB_TOKEN": "bob-token-654321"}
	return doc, func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
