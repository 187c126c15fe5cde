//lint:file-ignore SA1019 the test plays a client of a session revision, which still answers sampling.

package hub

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 25 defect 4: a 2025 client that hangs up its call's POST while the
// server behind the call is asking it for sampling leaves that request with
// nobody to answer it. The request fails at once, so the server's call (and
// the hub's record of it) ends with it rather than at the call's timeout,
// and the next call that asks the same client is answered.
func TestARequestOnAClosedStreamFailsAtOnce(t *testing.T) {
	asked := make(chan error, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}}})
			asked <- err
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled"}}}, nil
		})
	th := keyedHub(t, "asker", hubtest.ServeMCP(t, s, nil))
	waitTool(t, th, "ask")

	client := mcp.NewClient(&mcp.Implementation{Name: "patient", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "hi"}}, nil
		},
	})
	hc := &http.Client{Transport: hubtest.Bearer{Token: adaTok, Base: http.DefaultTransport}}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: th.url + "/operator/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	// The same session's call, POSTed by hand so the test can hang up on
	// its stream once the sampling request is on it, without cancelling.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, th.url+"/operator/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && !strings.Contains(lines.Text(), `"sampling/createMessage"`) {
	}
	if lines.Err() != nil {
		t.Fatal(lines.Err())
	}
	hangUp()
	_ = resp.Body.Close()

	select {
	case err := <-asked:
		if err == nil {
			t.Fatal("the sampling request of a call whose client hung up was answered")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sampling request of a call whose client hung up is still waiting for an answer")
	}

	// The server is free to ask again, and this time the client answers.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("the next call: %v %s", err, resultJSON(t, res))
	}
	if err := <-asked; err != nil {
		t.Fatalf("the next call's sampling request: %v", err)
	}
}
