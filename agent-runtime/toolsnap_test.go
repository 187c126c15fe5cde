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
// rules every builtin tool keeps. With a store, the artifacts' tool skill
// and a vendor's knowledge base (whose search_knowledge is a builtin,
// KB-3) and a sandbox every builtin of this build is registered.
func TestBuiltinToolSurface(t *testing.T) {
	deps := BuiltinDeps{
		Directory:  func() *authority.Directory { return testDirectory() },
		Store:      NewStore(testNode(t)),
		ToolSkills: BundledToolSkills(func(string) bool { return true }),
		Knowledge:  NewVendorKnowledge("confluence", nil, nil),
		Sandbox:    &Sandbox{},
		Runtime:    func() *Runtime { return nil },
	}
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server { return NewBuiltinServer(deps, trust, nil) })
	lt, err := c.CS.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != len(BuiltinTools(deps)) || len(lt.Tools) != 11 {
		t.Fatalf("listed %d tools, the table has %d", len(lt.Tools), len(BuiltinTools(deps)))
	}
	for _, tool := range lt.Tools {
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/toolsnaps", lt.Tools)
}

// CAT-3: a builtin whose dependency is absent is not registered at all:
// no store, no diary, skills, onboarding mark or private channel; no tool
// skills, no load_tool_skill; no sandbox (a node without bubblewrap), no
// run_sandbox.
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

// OPS-3: the decisions about seats and answer_knowledge, frozen beside the
// builtins, keep the same rules, and every one is operator-only: listed
// with the operator audience, so the hub offers it to no seat.
func TestDecisionToolSurface(t *testing.T) {
	dir := func() *authority.Directory { return testDirectory() }
	var listed []*mcp.Tool
	for _, open := range []func(servers.Trust) *mcp.Server{
		func(trust servers.Trust) *mcp.Server {
			return NewDecisionServer(DecisionDeps{Directory: dir, Runtime: func() *Runtime { return nil }}, trust, nil)
		},
		func(trust servers.Trust) *mcp.Server { return NewAnswerServer(AnswerDeps{}, trust, nil) },
	} {
		c := serverstest.Connect(t, open)
		lt, err := c.CS.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, lt.Tools...)
	}
	if len(listed) != 5 {
		t.Fatalf("listed %d tools", len(listed))
	}
	for _, tool := range listed {
		if tool.Meta[servers.MetaAudience] != servers.AudienceOperator {
			t.Errorf("%s is not operator-only: %v", tool.Name, tool.Meta)
		}
		for _, v := range toolsnap.Rules(tool) {
			t.Error(v)
		}
	}
	toolsnap.Check(t, "testdata/decisionsnaps", listed)
}
