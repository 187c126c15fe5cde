package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
)

// Issue 39, build 2: a 2026-07-28 client's input round begun on one node
// of a fleet is finished on the other — the requestState one node sealed
// opens on the other, under the fleet's key — and the server gets its own
// state and the client's answer back.
func TestFleetFinishesAnInputRoundOnAnotherNode(t *testing.T) {
	up := newAskingUpstream(t)
	doc := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: asking, url: %q}`, up.url))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodes := openFleetNodes(t, ctx, Options{Company: doc.Parse(t), StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }}, func(*testNode) {})
	sw := &nodeSwitch{down: map[int]bool{}, served: map[int]int{}}
	for _, n := range nodes {
		srv := httptest.NewServer(n.hub.Handler())
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		sw.nodes = append(sw.nodes, u)
		eventually(t, 10*time.Second, "node "+n.name+" lists confirm", func() (bool, string) {
			_, ok := CompanyRegistry(n.hub.company).Resolve("confirm")
			return ok, "not yet"
		})
	}
	cs, err := hubtest.DialClient(t, sw.nodes[0].String()+"/operator/mcp", &http.Client{Transport: hubtest.Bearer{Token: "ada-token-123456", Base: sw}},
		"2026-07-28", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes-42"}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	up.take()
	sw.mu.Lock()
	first := len(sw.posts)
	sw.mu.Unlock()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{}})
	if err != nil || res.IsError || hubtest.Text(res) != "confirm confirmed: accept yes-42" {
		t.Fatalf("the round did not finish with the client's answer: %v %s", err, resultJSON(t, res))
	}
	sw.mu.Lock()
	posts := sw.posts[first:]
	sw.mu.Unlock()
	if len(posts) != 2 || posts[0] == posts[1] {
		t.Fatalf("the call's two rounds went to nodes %v, want one to each", posts)
	}
	if calls := up.take(); len(calls) != 2 || calls[1].state != upState+" confirm" {
		t.Fatalf("the server saw %+v, want a first call and one with its own state back", calls)
	}
}
