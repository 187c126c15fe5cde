package tracker

import (
	"testing"

	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// The projectors decide, in log order, whatever a tool checked before it
// wrote: every rule of the board holds for an operation no tool screened
// (TRK-1, TRK-5, WR-8). The cases are testdata/projector_rules.json.
func TestProjectorRules(t *testing.T) {
	statetest.Rules(t, "testdata/projector_rules.json", func(t *testing.T) *state.Node { return newHarness(t).node }, ada)
}
