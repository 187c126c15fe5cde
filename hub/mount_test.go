package hub

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// floodServer is a first-party server with the echo tool and one whose
// answer is past the in-process transport's 16 MiB frame: reading it ends
// the mount's connection, as an oversized item once did the tracker's.
func floodServer() FirstParty {
	return FirstParty{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
		servers.Register(s, tr, nil, echoTool())
		s.AddTool(&mcp.Tool{Name: "flood", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 17<<20)}}}, nil
			})
		return s
	}}
}

// Issue 15, finding 1 (REF-6, MCP-6): a first-party mount whose in-process
// connection breaks makes a new one. The call that broke it is refused
// unavailable, marked as possibly having taken effect; the server's other
// tools answer again right after, every time it breaks.
func TestMountReconnectsWhenItsConnectionBreaks(t *testing.T) {
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	c := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").Parse(t)
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{floodServer()}, Logger: logger,
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	cs := hubtest.Connect(t, hubtest.Serve(t, h.Handler())+"/operator/mcp", "ada-token-123456", "")
	for round := 1; round <= 2; round++ {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "flood", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		class, _ := servers.ClassOf(res)
		if !res.IsError || class != "unavailable" || !strings.Contains(hubtest.Text(res), "may have taken effect") {
			t.Fatalf("round %d: the call that broke the connection: isError %v class %q: %.300s", round, res.IsError, class, hubtest.Text(res))
		}
		res, out := callEcho(t, cs, map[string]any{"text": "still here"})
		if res.IsError || out.Text != "still here" {
			t.Fatalf("round %d: echo after the break: %s", round, hubtest.Text(res))
		}
	}
	if n := strings.Count(logs.String(), `"msg":"first_party_reconnected"`); n != 2 {
		t.Fatalf("%d first_party_reconnected events, want 2:\n%s", n, logs.String())
	}
	if err := h.Close(); err != nil || h.Close() != nil {
		t.Fatal("Close twice failed")
	}
}
