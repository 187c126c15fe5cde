package artifacts

import (
	"testing"

	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// The projectors decide, in log order, every rule a tool checked before it
// wrote (ART-2..8): testdata/projector_rules.json, operations written
// straight to the log as another node's tools may have.
func TestProjectorRules(t *testing.T) {
	statetest.Rules(t, "testdata/projector_rules.json", func(t *testing.T) *state.Node { return newHarness(t).node }, ada)
}
