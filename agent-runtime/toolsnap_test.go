package agent

import (
	"context"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The builtin tool surface, frozen in testdata/toolsnaps, and the rules every
// builtin tool keeps.
func TestBuiltinToolSurface(t *testing.T) {
	trust, _ := servers.InProcessTrust()
	s := NewBuiltinServer(func() *authority.Directory { return testDirectory() }, trust, nil)
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "snap", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != len(BuiltinTools(nil)) {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(BuiltinTools(nil)))
	}
	for _, tool := range lt.Tools {
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}
