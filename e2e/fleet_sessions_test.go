package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
)

// rotation sends a client's POSTs to the fleet's live nodes in turn and
// its event stream (GET) to one of them, as a balancer without
// stickiness would; it counts the POSTs each node answered.
type rotation struct {
	nodes  []*url.URL
	stream int

	mu     sync.Mutex
	next   int
	down   map[int]bool
	posted map[int]int
}

func (r *rotation) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	n := r.stream
	if req.Method != http.MethodGet {
		n = r.next % len(r.nodes)
		r.next++
	}
	for r.down[n] {
		n = (n + 1) % len(r.nodes)
	}
	if req.Method == http.MethodPost {
		r.posted[n]++
	}
	r.mu.Unlock()
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = r.nodes[n].Host, r.nodes[n].Host
	return http.DefaultTransport.RoundTrip(req)
}

// Issue 39, build 1, through `crewlet serve` nodes of an embedded fleet: a
// 2025 session opened on one node is served by all three, each request
// of it sent to the next node, and after kill -9 of a node the client
// carries on through the other two under the same session id.
func TestFleetServesASessionOnEveryNode(t *testing.T) {
	t.Parallel()
	r := newFleetRig(t, false)
	rot := &rotation{stream: 1, down: map[int]bool{}, posted: map[int]int{}}
	for _, h := range r.hubs {
		u, err := url.Parse(h.baseURL())
		if err != nil {
			t.Fatal(err)
		}
		rot.nodes = append(rot.nodes, u)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: r.hubs[0].mcpURL(),
		HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: e2eToken, Base: rot}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-rotating", Version: "0"}, nil).
		Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	id := cs.ID()
	list := func(when string) {
		t.Helper()
		for i := range 6 {
			res := callTool(t, cs, "list_work_items", map[string]any{"project": "CORE"})
			if res.IsError {
				t.Fatalf("%s, call %d: %v", when, i, res.Content)
			}
		}
	}
	list("on three nodes")
	rot.mu.Lock()
	posted := fmt.Sprint(rot.posted)
	each := rot.posted[0] > 0 && rot.posted[1] > 0 && rot.posted[2] > 0
	rot.mu.Unlock()
	if !each {
		t.Fatalf("the session's requests did not reach every node: %s", posted)
	}

	r.kill(t, 0)
	rot.mu.Lock()
	rot.down[0] = true
	rot.mu.Unlock()
	list("after node 0 was killed")
	if cs.ID() != id {
		t.Fatalf("the session id changed from %s to %s", id, cs.ID())
	}
}
