// Package serverstest is the test kit of first-party servers: a client
// connected in memory to a server built with the servers kit, which calls
// tools as a given caller and reads their answers and refusals. It is for
// tests only; nothing in the product imports it.
package serverstest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// Client is a client session to a first-party server, holding the proof
// the server trusts, as the hub's in-process connection does.
type Client struct {
	t     testing.TB
	CS    *mcp.ClientSession
	Proof string
}

// Connect builds a server under a fresh in-process trust and connects a
// client to it over the SDK's in-memory transport. Both ends are closed
// when the test ends.
func Connect(t testing.TB, build func(servers.Trust) *mcp.Server) *Client {
	t.Helper()
	trust, proof := servers.InProcessTrust()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := build(trust).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return &Client{t: t, CS: cs, Proof: proof}
}

// Raw calls a tool as caller and answers the result as it came.
func (c *Client) Raw(caller authority.Caller, tool string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	res, err := c.CS.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: servers.CallerMeta(caller, c.Proof)})
	if err != nil {
		c.t.Fatalf("%s: CallTool: %v", tool, err)
	}
	return res
}

// OK calls a tool that must succeed and answers its structured output.
func (c *Client) OK(caller authority.Caller, tool string, args map[string]any) map[string]any {
	c.t.Helper()
	res := c.Raw(caller, tool, args)
	if res.IsError {
		c.t.Fatalf("%s(%v) refused: %s", tool, args, Text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		c.t.Fatalf("%s: output %s: %v", tool, b, err)
	}
	return out
}

// Refusal is a refused call's structured content.
type Refusal struct {
	Class    authority.Class `json:"class"`
	Sentence string          `json:"sentence"`
	Data     map[string]any  `json:"data"`
}

// Refused calls a tool that must be refused with class, and answers the
// refusal.
func (c *Client) Refused(caller authority.Caller, tool string, args map[string]any, class authority.Class) Refusal {
	c.t.Helper()
	res := c.Raw(caller, tool, args)
	got, ok := servers.ClassOf(res)
	if !ok || got != class {
		c.t.Fatalf("%s(%v): class %q (refused %v), want %q: %s", tool, args, got, ok, class, Text(res))
	}
	var r Refusal
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		c.t.Fatalf("%s: refusal %s: %v", tool, b, err)
	}
	if r.Sentence != Text(res) {
		c.t.Fatalf("%s: the refusal's text %q is not its sentence %q", tool, Text(res), r.Sentence)
	}
	return r
}

// Text joins a result's text content.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MustContain fails the test for each part s does not contain.
func MustContain(t testing.TB, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}
