package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/skills"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// artifactWrites are the five tools that write an artifact's bytes, its
// schema or its rows (ART-9).
var artifactWrites = []string{"create_artifact", "publish_artifact", "upload_artifact_asset", "write_artifact_data", "set_artifact_schema"}

// ART-9: load_tool_skill hands a seat in its turn, and a person on the
// operator surface, the whole text of skill:artifacts — the very text of
// skills/crewlet-artifacts/SKILL.md a person's own assistant installs,
// past its front matter — with the tools it guards; a key no skill has is
// refused not_found, naming the ones there are.
func TestLoadToolSkill(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "skills", "crewlet-artifacts", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(file), "\n---\n")
	if !strings.HasPrefix(string(file), "---\nname: crewlet-artifacts\ndescription: ") || !ok {
		t.Fatalf("SKILL.md opens with no front matter naming it:\n%.200s", file)
	}
	body = strings.TrimLeft(body, "\n")
	deps := BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() },
		ToolSkills: BundledToolSkills(func(string) bool { return true })}
	c := serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return NewBuiltinServer(deps, tr, nil) })

	seat := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	person := authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada"}
	for _, who := range []authority.Caller{seat, person} {
		got := c.OK(who, "load_tool_skill", map[string]any{"key": "skill:artifacts"})
		if got["key"] != "skill:artifacts" || got["body"] != body || body != skills.Artifacts() {
			t.Fatalf("%s loaded %v, not the skill file's text", who.Seat, got["key"])
		}
		var guards []string
		b, _ := json.Marshal(got["guards"])
		_ = json.Unmarshal(b, &guards)
		if !slices.Equal(guards, artifactWrites) {
			t.Errorf("%s: the skill guards %v", who.Seat, guards)
		}
	}
	// The text teaches every tool it holds back, and what ART-9 says it
	// teaches about a datastore.
	for _, want := range append(slices.Clone(artifactWrites), "load_tool_skill", "a schema before rows", "batched writes",
		"Blind cells", "Guarded long text", "humans_only", "assigned_to_viewer") {
		if !strings.Contains(body, want) {
			t.Errorf("the skill's text does not mention %q", want)
		}
	}

	r := c.Refused(seat, "load_tool_skill", map[string]any{"key": "skill:tracker"}, authority.NotFound)
	serverstest.MustContain(t, r.Sentence, `"skill:tracker"`, "skill:artifacts")
}

// ART-9: in a seat's turn each of the five artifact writes is refused
// forbidden, naming skill:artifacts, until load_tool_skill loads it; an
// artifact read is never held back; once loaded, all five run.
func TestToolSkillHoldsBackTheFiveArtifactWrites(t *testing.T) {
	tools := []Tool{
		{Name: "load_tool_skill", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}},
		{Name: "get_artifact", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}},
		commentTool,
	}
	var before, after []modeltest.Reply
	for _, name := range artifactWrites {
		tools = append(tools, Tool{Name: name, Source: "builtin", Hints: servers.Hints{ReadOnly: servers.No}})
		before = append(before, call(name, map[string]any{"id": "art_1"}))
		after = append(after, call(name, map[string]any{"id": "art_1"}))
	}
	steps := slices.Concat(before,
		[]modeltest.Reply{call("get_artifact", map[string]any{"id": "art_1"}), call("load_tool_skill", map[string]any{"key": "skill:artifacts"})},
		after,
		[]modeltest.Reply{call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "made"}), done})
	h := newHarness(t, modeltest.Steps(steps...), tools,
		func(o *Options) { o.ToolSkills = BundledToolSkills(func(string) bool { return true }) })
	h.turn()

	reqs := h.model.Requests()
	for i, name := range artifactWrites {
		r := reqs[i+1].LastResults()
		if len(r) != 1 || !strings.HasPrefix(r[0].Text, "Refused (forbidden)") || !strings.Contains(r[0].Text, "skill:artifacts") {
			t.Errorf("%s before the skill: %+v", name, r)
		}
	}
	want := slices.Concat([]string{"get_artifact", "load_tool_skill"}, artifactWrites, []string{"comment_on_work_item"})
	if got := h.hub.surface.names(); !slices.Equal(got, want) {
		t.Fatalf("calls that ran: %v, want %v", got, want)
	}
}
