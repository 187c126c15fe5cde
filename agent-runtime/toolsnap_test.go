package agent

import (
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/toolsnap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BLT-1: the builtin tool surface, frozen in testdata/toolsnaps, and the
// rules every builtin tool keeps. With a store and the artifacts' tool
// skill every builtin of this build is registered; run_sandbox never is.
func TestBuiltinToolSurface(t *testing.T) {
	deps := BuiltinDeps{
		Directory:  func() *authority.Directory { return testDirectory() },
		Store:      NewStore(testNode(t)),
		ToolSkills: BundledToolSkills(func(string) bool { return true }),
	}
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server { return NewBuiltinServer(deps, trust, nil) })
	lt, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != len(BuiltinTools(deps)) || len(lt.Tools) != 9 {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(BuiltinTools(deps)))
	}
	for _, tool := range lt.Tools {
		if tool.Name == "run_sandbox" {
			t.Error("run_sandbox is registered on a node with no sandbox")
		}
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}

// CAT-3: a builtin whose dependency is absent is not registered at all:
// no store, no diary, skills, onboarding mark or private channel; no tool
// skills, no load_tool_skill.
func TestBuiltinsNeedTheirDependencies(t *testing.T) {
	tools := BuiltinTools(BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() }})
	if len(tools) != 1 || tools[0].Name != "lookup_colleague" {
		var names []string
		for _, tool := range tools {
			names = append(names, tool.Name)
		}
		t.Fatalf("without a store or tool skills: %v", names)
	}
	if got := BundledToolSkills(func(string) bool { return false }); len(got) != 0 {
		t.Fatalf("a tool skill for tools the node lacks: %+v", got)
	}
}
