package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A fleet behind a real balancer (issue 39; OPS-1, FLT-1..3): three nodes
// behind HAProxy, round-robin with no stickiness, health checks on
// /healthz. Clients make calls through it, a node is killed with kill -9
// while they do, and they carry on without opening a new session: only
// calls in flight on the dead node fail, and a write answered applied is
// on every live node once.

// balancedCall is one tool call a client made through the balancer.
type balancedCall struct {
	client, tool, title string
	began, ended        time.Time
	err                 error  // no result: the transport or the protocol failed
	refused             string // the class of a refused result
	outcome             string // a write's outcome
}

// failed says the call did not do its work: a write is done once it is
// durable, applied (read on the node that took it) or pending (durable,
// its node's projection not there yet: WR-1).
func (c balancedCall) failed() bool {
	return c.err != nil || c.refused != "" || c.tool == "create_work_item" && c.outcome != "applied" && c.outcome != "pending"
}

func (c balancedCall) String() string {
	return fmt.Sprintf("%s %s %q %s..%s: err %v, refused %q, outcome %q", c.client, c.tool, c.title,
		c.began.Format("15:04:05.000"), c.ended.Format("15:04:05.000"), c.err, c.refused, c.outcome)
}

// calls is what every client of a test did, in the order each finished.
type calls struct {
	mu  sync.Mutex
	all []balancedCall
}

func (cs *calls) add(c balancedCall) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.all = append(cs.all, c)
}

func (cs *calls) snapshot() []balancedCall {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]balancedCall(nil), cs.all...)
}

// succeededSince counts client's calls that began at or after since and
// succeeded.
func (cs *calls) succeededSince(client string, since time.Time) int {
	n := 0
	for _, c := range cs.snapshot() {
		if c.client == client && !c.began.Before(since) && !c.failed() {
			n++
		}
	}
	return n
}

// callThrough makes one call on a go-sdk session and records it.
func callThrough(cs *mcp.ClientSession, client, tool, title string) balancedCall {
	c := balancedCall{client: client, tool: tool, title: title, began: time.Now()}
	args := map[string]any{}
	if title != "" {
		args["title"] = title
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	c.ended, c.err = time.Now(), err
	if err != nil {
		return c
	}
	var out struct {
		Class   string `json:"class"`
		Outcome string `json:"outcome"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if res.IsError {
		c.refused = out.Class
		if c.refused == "" {
			c.refused = "(no class)"
		}
	}
	c.outcome = out.Outcome
	return c
}

// goSDKThrough connects a go-sdk client of revision rev through the
// balancer and makes six calls in a row: with nothing else calling, the
// balancer takes each to the next node, so they reach every node
// (a 2025 session's event stream, opened meanwhile, takes at most one turn).
func goSDKThrough(t *testing.T, b *balancedFleet, client, rev string, record *calls) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: b.mcpURL(), HTTPClient: b.wire.client(client)}
	// A person at the client, answering a server's question.
	person := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: client, Version: "0"}, person).
		Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("%s connects through the balancer: %v", client, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("%s negotiated %s through the balancer, want %s", client, got, rev)
	}
	for range 6 {
		c := callThrough(cs, client, "test_simple_text", "")
		record.add(c)
		if c.failed() {
			t.Fatalf("%s before any node died: %s", client, c)
		}
	}
	if s := spread(b.wire.exchanges(client)); s["n0"] == 0 || s["n1"] == 0 || s["n2"] == 0 {
		t.Fatalf("%s's requests in a row were answered by %v, not by every node in turn", client, s)
	}
	return cs
}

// goSDKWorkers has a go-sdk session make calls through the balancer until
// stop: one worker forwards the shared echo server's call, one files work
// items. Each call is paced, so a run straddles the kill with a few
// hundred calls, all read back quickly.
func goSDKWorkers(b *balancedFleet, cs *mcp.ClientSession, client string, record *calls, stop <-chan struct{}, wg *sync.WaitGroup) {
	for _, tool := range []string{"test_simple_text", "create_work_item"} {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(40 * time.Millisecond):
				}
				title := ""
				if tool == "create_work_item" {
					title = fmt.Sprintf("%s-%d-%s", client, k, b.marker)
				}
				record.add(callThrough(cs, client, tool, title))
			}
		})
	}
}

func TestFleetBehindBalancer(t *testing.T) {
	t.Parallel()
	asking := askingServer(t)
	b := newBalancedFleetOf(t, func(marker, bin string) string {
		return fleetCompanyDoc(marker, bin) + fmt.Sprintf("  - {name: asking, url: %q, tool_prefix: ask_, trust: auto}\n", asking)
	})
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	phase("three nodes behind haproxy")
	// The node killed is one that does not lead the log: a write on a
	// live node then never waits on the log's election of a new leader
	// (see logLeader).
	leader := b.logLeader(t)
	victim := 0
	for victim < 3 && fmt.Sprintf("n%d", victim) == leader {
		victim++
	}
	victimName := fmt.Sprintf("n%d", victim)

	// go-sdk clients of both revisions: a 2025-11-25 session, whose every
	// request after initialize carries its id and reaches any node, and a
	// 2026-07-28 client, which has none.
	clients := []struct{ name, rev string }{
		{"go-sdk 2026-07-28", "2026-07-28"},
		{"go-sdk 2025-11-25", "2025-11-25"},
	}
	record := &calls{}
	// Round-robin, no stickiness: each client's calls in a row reach
	// every node.
	var sessions []*mcp.ClientSession
	for _, c := range clients {
		sessions = append(sessions, goSDKThrough(t, b, c.name, c.rev, record))
	}
	phase("each client's calls in a row answered by every node")
	inputRoundAcrossNodes(t, b, sessions[0], clients[0].name)
	phase("an input round begun on one node finished on another")
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for i, c := range clients {
		goSDKWorkers(b, sessions[i], c.name, record, stop, &workers)
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			workers.Wait()
		}
	}
	defer halt()
	// The TypeScript SDK's client (2025-11-25, a session): calls before
	// the kill, a pause while it happens, calls after, on one session.
	ts := startTSSession(t, b)

	ts.awaitPaused(t)
	// Calls in flight on the node are those begun before it was dead
	// (kill answers once it has been reaped) and not ended before the
	// signal was sent.
	phase("the clients are calling; kill -9 " + victimName)
	killed := time.Now()
	b.kill(t, victim)
	dead := time.Now()
	ts.resume(t)
	// The clients carry on: each makes calls of both kinds that succeed,
	// begun after the kill, well past the health checks taking the node
	// out (two failed checks a second apart).
	settled := dead.Add(3 * time.Second)
	for _, c := range clients {
		waitUntil(t, time.Minute, c.name+" carries on after the kill", func() (bool, string) {
			n := record.succeededSince(c.name, settled)
			return n >= 10, fmt.Sprint(n, " calls")
		})
	}
	halt()
	tsCalls := ts.wait(t)
	phase("the clients carried on")

	all := append(record.snapshot(), tsCalls...)
	var after []exchange
	for _, c := range clients {
		xs := b.wire.exchanges(c.name)
		// Without a new session: one discovery (2026-07-28, sessionless)
		// or one initialize (2025-11-25) for the whole run, and every
		// request of a 2025 session carries the one id it was given.
		m := methods(xs)
		switch c.rev {
		case "2026-07-28":
			if m["server/discover"] != 1 || m["initialize"] != 0 {
				t.Errorf("%s discovered %d times and initialized %d times in one run", c.name, m["server/discover"], m["initialize"])
			}
		case "2025-11-25":
			ids := map[string]bool{}
			for _, x := range xs {
				if x.method != "initialize" {
					ids[x.session] = true
				}
			}
			if m["initialize"] != 1 || len(ids) != 1 || ids[""] {
				t.Errorf("%s initialized %d times, and its requests carried the session ids %v", c.name, m["initialize"], ids)
			}
		}
		// Only exchanges in flight on the dead node went unanswered by a
		// hub: each in flight when it died, answered by the balancer for
		// it (or cut, with no answer).
		for _, x := range xs {
			if x.status == 200 || x.status == 202 {
				continue
			}
			inFlight := x.began.Before(dead) && !x.ended.Before(killed)
			if !inFlight || x.status != 0 && x.node != victimName {
				t.Errorf("an exchange not in flight on %s when it died failed:\n%s", victimName, describe([]exchange{x}))
			}
		}
		after = append(after, exchangesSince(xs, settled)...)
	}
	// Once the health checks have taken the node out, the two live nodes
	// answer in turn.
	if s := spread(after); s[victimName] != 0 || len(s) != 2 {
		t.Errorf("after the kill the clients were answered by %v; want the two live nodes", s)
	}
	// Only calls in flight on the dead node failed: begun before the
	// kill, at most one per worker (the TypeScript client was between two
	// calls when it happened).
	failed := 0
	for _, c := range all {
		if !c.failed() {
			continue
		}
		failed++
		if !c.began.Before(dead) || c.ended.Before(killed) || c.client == tsClientName {
			t.Errorf("a call not in flight when %s died failed: %s", victimName, c)
		}
	}
	if failed > 2*len(clients) {
		t.Errorf("%d calls failed; at most one per worker can have been in flight", failed)
	}
	t.Logf("%d calls through the balancer, %d failed (in flight on %s at the kill)", len(all), failed, victimName)

	// Every write answered applied or pending is on every live node, once;
	// any other is there at most once.
	for i := range 3 {
		if i == victim {
			continue
		}
		cs := b.client(t, i)
		var seen map[string]int
		waitUntil(t, 30*time.Second, fmt.Sprintf("n%d projects every durable write", i), func() (bool, string) {
			seen = titles(t, cs)
			for _, c := range all {
				if (c.outcome == "applied" || c.outcome == "pending") && seen[c.title] == 0 {
					return false, c.title + " missing"
				}
			}
			return true, ""
		})
		for _, c := range all {
			if c.title != "" && seen[c.title] > 1 {
				t.Errorf("n%d holds %s %d times (answered %s)", i, c.title, seen[c.title], c.outcome)
			}
		}
	}
	pending := 0
	for _, c := range all {
		if c.outcome == "pending" {
			pending++
		}
	}
	t.Logf("%d writes answered pending (durable, not yet read on the node that took them)", pending)
	phase("every durable write found once")
}

// askingServer is a third-party server on MCP 2026-07-28 alone, over
// stateless HTTP, reached by every node: its tool confirm asks the person
// a question in its answer (an input round) with a state of its own, and
// answers once called again with the person's answer and that state.
func askingServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "0"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	s.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if res, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult); ok {
			answer, _ := res.Content["answer"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed: " + answer + " in " + req.Params.RequestState}}}, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Mode: "form", Message: "confirm?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}},
			RequestState: "round-1",
		}, nil
	})
	return hubtest.ServeMCP(t, s, &mcp.StreamableHTTPOptions{Stateless: true})
}

// inputRoundAcrossNodes (issue 39, build 2): a 2026-07-28 client's call
// whose server asks the person a question is two requests, the question
// and the call again with the answer and the round's sealed state; nothing
// else calling, the balancer takes the second to the next node, which
// opens the state the first sealed and finishes the call.
func inputRoundAcrossNodes(t *testing.T, b *balancedFleet, cs *mcp.ClientSession, client string) {
	t.Helper()
	first := len(b.wire.exchanges(client))
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "ask_confirm", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("an input round through the balancer: %v", err)
	}
	if text := hubtest.Text(res); res.IsError || text != "confirmed: yes in round-1" {
		t.Fatalf("the round finished with %q (refused %v), not with the person's answer and the server's state", text, res.IsError)
	}
	var nodes []string
	for _, x := range b.wire.exchanges(client)[first:] {
		if x.method == "tools/call" {
			nodes = append(nodes, x.node)
		}
	}
	if len(nodes) != 2 || nodes[0] == nodes[1] || nodes[0] == "" {
		t.Fatalf("the round's two requests were answered by %v; want two nodes", nodes)
	}
}

const tsClientName = "TypeScript SDK"

// tsSession is the TypeScript SDK's client running a script through the
// balancer: four calls of each kind, a pause, four more.
type tsSession struct {
	paused, resumed string
	script          []tsCall
	out             tsOutput
	done            chan struct{}
	began           time.Time
}

func startTSSession(t *testing.T, b *balancedFleet) *tsSession {
	dir := t.TempDir()
	s := &tsSession{paused: dir + "/paused", resumed: dir + "/resumed", done: make(chan struct{}), began: time.Now()}
	calls := func(when string) {
		for k := range 4 {
			s.script = append(s.script, tsCall{Name: "test_simple_text"},
				tsCall{Name: "create_work_item", Arguments: map[string]any{"title": fmt.Sprintf("ts-%s-%d-%s", when, k, b.marker)}})
		}
	}
	calls("before")
	s.script = append(s.script, tsCall{Signal: s.paused}, tsCall{WaitFor: s.resumed})
	calls("after")
	go func() {
		// A failure in here marks the test failed and ends this goroutine
		// only; done still closes, and wait reports it.
		defer close(s.done)
		s.out = runTSClient(t, b.mcpURL(), e2eToken, s.script)
	}()
	return s
}

func (s *tsSession) awaitPaused(t *testing.T) {
	waitUntil(t, time.Minute, "the TypeScript client's first calls", func() (bool, string) {
		select {
		case <-s.done:
			t.Fatal("the TypeScript client ended before its pause")
		default:
		}
		_, err := os.Stat(s.paused)
		return err == nil, fmt.Sprint(err)
	})
}

func (s *tsSession) resume(t *testing.T) {
	if err := os.WriteFile(s.resumed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the client to end, checks it spoke 2025-11-25 on one
// session throughout, and answers its calls (their times unknown but for
// the side of the pause they were on).
func (s *tsSession) wait(t *testing.T) []balancedCall {
	<-s.done
	if t.Failed() {
		t.FailNow()
	}
	if s.out.ProtocolVersion != "2025-11-25" {
		t.Fatalf("the TypeScript client negotiated %q through the balancer", s.out.ProtocolVersion)
	}
	ids := map[string]bool{}
	for _, id := range s.out.SessionIDs {
		ids[id] = true
	}
	if len(ids) != 1 || ids[""] {
		t.Errorf("the TypeScript client's session ids over its run: %v", s.out.SessionIDs)
	}
	if !s.out.SessionEnded {
		// Not yet held to: a node that takes a DELETE drops the session's
		// record in the fleet bucket with the request's own context, and a
		// read of a bucket whose leader was on the dead node can wait for
		// good (fleetSessions.remove).
		t.Logf("the TypeScript client's DELETE of its session was not answered within 5 s")
	}
	var out []balancedCall
	before := true
	for i, step := range s.script {
		if step.Signal != "" || step.WaitFor != "" {
			before = false
			continue
		}
		r := s.out.Results[i]
		c := balancedCall{client: tsClientName, tool: step.Name, began: s.began}
		if !before {
			c.began = time.Now() // after the kill
		}
		if title, ok := step.Arguments["title"].(string); ok {
			c.title = title
		}
		var body struct {
			Class   string `json:"class"`
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal(r.StructuredContent, &body)
		switch {
		case r.Threw():
			c.err = fmt.Errorf("%s", r.Error)
		case r.IsError:
			c.refused = body.Class + " " + r.Text()
		}
		c.outcome = body.Outcome
		out = append(out, c)
	}
	return out
}

// exchangesSince are the exchanges begun at or after since.
func exchangesSince(xs []exchange, since time.Time) []exchange {
	var out []exchange
	for _, x := range xs {
		if !x.began.Before(since) {
			out = append(out, x)
		}
	}
	return out
}

// logLeader is the node leading the log's stream, once every copy is
// current. When that node dies, the others elect another within seconds,
// and until then a write's append finds nobody to answer it: a write made
// on a live node meanwhile is answered unknown, a cost beyond the calls in
// flight on the dead node, not yet removed (the log's append takes "no
// response from stream" for an outcome unknown rather than trying again
// until the new leader answers).
func (b *balancedFleet) logLeader(t *testing.T) string {
	b.settle(t, 0)
	for _, s := range b.fleet(t, 0).Streams {
		if s.Name == "CREWLET_OPS" {
			return s.Leader
		}
	}
	t.Fatalf("GET /fleet names no log stream: %+v", b.fleet(t, 0).Streams)
	return ""
}
