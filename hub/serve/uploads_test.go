package serve

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/hubtest"
)

// CAT-5: the artifact tools are registered on a node that can take
// uploads, and on one that cannot none is, nor the skill:artifacts Tool
// Skill that guards them; the tracker's tools are there either way. The
// embedded node takes uploads.
func TestArtifactToolsOnlyWhereUploadsAreTaken(t *testing.T) {
	node, closeNode, err := openState(t.Context(), t.TempDir(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeNode)
	if !takesUploads(t.Context(), node) {
		t.Fatal("the embedded node does not take uploads")
	}
	c := hubtest.NewCompany().Person("ada", true).Parse(t)
	for _, uploads := range []bool{true, false} {
		fp := firstParty(node, indexes{}, uploads, func() string { return "" }, agent.BuiltinDeps{Store: agent.NewStore(node), ToolSkills: toolSkills(uploads)},
			func() *agent.Runtime { return nil }, func(hub.Deps) agent.AnswerDeps { return agent.AnswerDeps{} },
			func() *hub.Hub { return nil }, c)
		h, err := hub.New(context.Background(), hub.Options{Company: c, FirstParty: fp,
			Env: hubtest.NewEnv(map[string]string{"CREWLET_OPERATOR_TOKEN": "op-token-0123456789"}).Lookup})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range h.Catalogue().Entries() {
			names = append(names, e.Name)
		}
		_ = h.Close()
		artifactsListed := slices.ContainsFunc(artifactTools, func(n string) bool { return slices.Contains(names, n) })
		skill := slices.ContainsFunc(toolSkills(uploads), func(s agent.ToolSkill) bool { return strings.Contains(s.Key, "artifacts") })
		if artifactsListed != uploads || skill != uploads || !slices.Contains(names, "create_work_item") {
			t.Errorf("takes uploads %v: artifact tools listed %v, skill:artifacts %v, in %v", uploads, artifactsListed, skill, names)
		}
	}
}
