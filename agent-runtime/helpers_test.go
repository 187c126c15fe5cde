package agent

import (
	"testing"

	"github.com/crewlet/hub/servers/state"
)

// testNode opens a state node with the runtime's projectors in a fresh
// directory, closed when the test ends.
func testNode(t testing.TB) *state.Node {
	t.Helper()
	n, err := state.Open(t.Context(), state.Options{Dir: t.TempDir(), Projectors: Projectors()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}
