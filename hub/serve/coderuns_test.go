package serve

import (
	"slices"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// CAT-3, issue 38: run_sandbox is registered on a node that can make a
// box, and omitted, not registered and broken, on one without bwrap.
func TestRunSandboxOnlyWhereABoxCanBeHad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bwrap bool
	}{{"with bwrap", true}, {"without bwrap", false}} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.bwrap {
				t.Setenv("PATH", t.TempDir())
			}
			model := modeltest.Start(t, answerOnItem("ok"))
			n := startTurnNode(t, model, company, env)
			lt, err := n.client(env["ADA_TOKEN"]).ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
			}
			if got := slices.Contains(names, "run_sandbox"); got != tc.bwrap {
				t.Fatalf("run_sandbox listed %v: %v", got, names)
			}
		})
	}
}
