package tracker

import (
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// Wakes answers up to limit of the tracker's wake rows after cursor (""
// for the first), in the order they were written: the seats named in a
// comment, put a question or handed an item (TRK-4). Subject is the
// item's key.
func Wakes(n *state.Node, after string, limit int) ([]servers.Wake, error) {
	return servers.Wakes(n, kWake, after, limit)
}
