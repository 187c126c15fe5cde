package hub

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A session a node takes up from the fleet's record holds a slot of its
// credential's sessions cap (issue 37's caps, issue 39's sessions): a
// session the node closed on its grace, whose record lives on, does not
// come back free of the cap; and its slot is given back when it closes.
func TestFleetSessionTakenUpCountsAgainstTheCap(t *testing.T) {
	doc, env := twoPeople()
	c := doc.Parse(t)
	one := 1
	c.API.Limits.SessionsPerCredential = &one
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: c, StartupWait: 10 * time.Second, Env: env,
		SessionIdle: 30 * time.Second, SessionGrace: time.Second}, func(*testNode) {})
	srv := httptest.NewServer(nodes[0].hub.Handler())
	t.Cleanup(srv.Close)
	const token = "ada-token-123456"
	open := func() (int, string) { t.Helper(); return initSession(t, srv.URL, token) }
	status, x := open()
	if status != http.StatusOK || x == "" {
		t.Fatalf("the first session: %d", status)
	}
	tab := nodes[0].hub.operator.sessions
	// Nothing but its handshake: the node closes it after the grace, and
	// its slot is free again. Its record stays in the fleet's bucket.
	eventually(t, 10*time.Second, "the first session closed on its grace", func() (bool, string) { return tab.get(x) == nil, "still held" })
	status, y := open()
	if status != http.StatusOK || y == "" {
		t.Fatalf("a session in the freed slot: %d", status)
	}
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	status, body := sessionPOST(t, srv.URL, token, x, list)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "credential laptop has 1 MCP sessions open") {
		t.Fatalf("the closed session taken up again past the cap: %d %s", status, body)
	}
	if tab.get(x) != nil {
		t.Fatal("the node holds the refused session")
	}
	end := func(id string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/operator/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %s", resp.Status)
		}
	}
	// Once the other session ends, its slot takes the first one back.
	end(y)
	if status, body := sessionPOST(t, srv.URL, token, x, list); status != http.StatusOK {
		t.Fatalf("the first session taken up in the freed slot: %d %s", status, body)
	}
	// And ending it gives the slot back.
	end(x)
	if status, _ := open(); status != http.StatusOK {
		t.Fatalf("a session after the taken-up one ended: %d", status)
	}
}

// A node that takes up a session writes its record again at the
// session's first request there: the record it read may be near the end
// of its life (another node wrote it up to a quarter of the idle time
// ago), and a record that expires while the session is in use closes the
// session on every node.
func TestFleetSessionTakenUpRenewsItsRecord(t *testing.T) {
	ctx, nodes, base, id := openedOnNodeA(t)
	const token = "ada-token-123456"
	records := nodes[1].hub.operator.sessions.fleet.b
	before, err := records.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := sessionPOST(t, base[1], token, id, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); status != http.StatusOK {
		t.Fatalf("the session through the other node: %d %s", status, body)
	}
	after, err := records.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision == before.Revision {
		t.Fatalf("the node that took the session up left its record at revision %d", before.Revision)
	}
}

// An issued id has one spelling: base64 leaves two bits of its last
// character unused, and a spelling with them set is not the id.
func TestSessionIDsHaveOneSpelling(t *testing.T) {
	ids := sessionIDs{key: []byte("fleet-sessions-key-0123456789abc")}
	for range 64 {
		id := ids.mint()
		if !ids.valid(id) {
			t.Fatalf("a minted id %q is refused", id)
		}
		last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", id[len(id)-1])
		for low := 1; low < 4; low++ {
			other := id[:len(id)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^low])
			if b, err := base64.RawURLEncoding.DecodeString(other); err != nil || len(b) != sessionIDRandom+sessionIDMAC {
				t.Fatalf("%q is no other spelling of %q", other, id)
			}
			if ids.valid(other) {
				t.Fatalf("%q, another spelling of the issued %q, passes for it", other, id)
			}
		}
	}
}

// An answer to a server's request is the session's seat's to give: another
// seat's credential naming the session is refused as any other request of
// it would be, not passed on to the node that asked.
func TestFleetAnswerFromAnotherSeatIsRefused(t *testing.T) {
	doc, env := twoPeople()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second, Env: env}, func(*testNode) {})
	srv := httptest.NewServer(nodes[0].hub.Handler())
	t.Cleanup(srv.Close)
	_, id := initSession(t, srv.URL, "ada-token-123456")
	if status, body := sessionPOST(t, srv.URL, "ada-token-123456", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	// An answer to a request node b asked of ada's client, sent by bob.
	answer := `{"jsonrpc":"2.0","id":"` + askPrefix + `b.1","result":{"action":"accept","content":{}}}`
	if status, body := sessionPOST(t, srv.URL, "bob-token-654321", id, answer); status != http.StatusForbidden {
		t.Fatalf("bob's answer on ada's session: %d %s", status, body)
	}
}

// A call that outlasts the session's record is not cut by it: the node
// serving the call keeps the record written while the call runs. With an
// idle time of 2 s the record lives 3 s (2.5, in whole seconds); the call
// here runs past twice that.
func TestFleetSessionOutlivesItsRecordDuringALongCall(t *testing.T) {
	doc, env := twoPeople()
	holder, entered, release := holderServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second, Env: env,
		SessionIdle: 2 * time.Second, SessionGrace: 2 * time.Second, FirstParty: []FirstParty{holder}}, func(*testNode) {})
	t.Cleanup(release)
	srv := httptest.NewServer(nodes[0].hub.Handler())
	t.Cleanup(srv.Close)
	const token = "ada-token-123456"
	_, id := initSession(t, srv.URL, token)
	if status, body := sessionPOST(t, srv.URL, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	answered := make(chan string, 1)
	go func() {
		status, body := sessionPOST(t, srv.URL, token, id, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
		answered <- fmt.Sprintf("%d %s", status, body)
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the call never started")
	}
	fs := nodes[0].hub.operator.sessions.fleet
	// What is waited for is the record's life running out twice over.
	time.Sleep(2 * fs.ttl)
	if _, err := fs.b.Get(ctx, id); err != nil {
		t.Fatalf("the session's record during the call: %v", err)
	}
	if nodes[0].hub.operator.sessions.get(id) == nil {
		t.Fatal("the session was closed during its call")
	}
	release()
	if got := <-answered; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `released`) {
		t.Fatalf("the long call answered %s", got)
	}
}

// A renewal extends the record's life and changes nothing of it: a node
// whose copy of the session is behind (a log level set through another
// node, not yet heard of) does not write its copy back over the record.
func TestFleetRenewalKeepsTheRecordAsItIs(t *testing.T) {
	ctx, nodes, base, id := openedOnNodeA(t)
	const token = "ada-token-123456"
	if status, body := sessionPOST(t, base[0], token, id, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); status != http.StatusOK {
		t.Fatalf("setLevel: %d %s", status, body)
	}
	// Node b's copy says another level, and its renewal is due.
	if status, body := sessionPOST(t, base[1], token, id, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); status != http.StatusOK {
		t.Fatalf("the session through node b: %d %s", status, body)
	}
	s := nodes[1].hub.operator.sessions.get(id)
	s.mu.Lock()
	s.rec.Level = "error"
	s.stored = time.Time{}
	s.mu.Unlock()
	if status, body := sessionPOST(t, base[1], token, id, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); status != http.StatusOK {
		t.Fatalf("the session through node b: %d %s", status, body)
	}
	e, err := nodes[1].hub.operator.sessions.fleet.b.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.Value), `"log_level":"debug"`) {
		t.Fatalf("the record after node b's renewal: %s", e.Value)
	}
}

// openedOnNodeA serves a fleet of two nodes of twoPeople over loopback
// HTTP and opens a 2025 session as ada through the first, initialized;
// it answers a context bounding the test, the nodes, their base URLs and
// the session's id.
func openedOnNodeA(t *testing.T) (context.Context, []*testNode, []string, string) {
	t.Helper()
	doc, env := twoPeople()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second, Env: env}, func(*testNode) {})
	var base []string
	for _, n := range nodes {
		srv := httptest.NewServer(n.hub.Handler())
		t.Cleanup(srv.Close)
		base = append(base, srv.URL)
	}
	_, id := initSession(t, base[0], "ada-token-123456")
	if status, body := sessionPOST(t, base[0], "ada-token-123456", id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return ctx, nodes, base, id
}
