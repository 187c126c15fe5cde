package agent

import (
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The builtin tool surface, frozen in testdata/toolsnaps, and the rules every
// builtin tool keeps.
func TestBuiltinToolSurface(t *testing.T) {
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server {
		return NewBuiltinServer(func() *authority.Directory { return testDirectory() }, trust, nil)
	})
	lt, err := c.CS.ListTools(t.Context(), nil)
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
