package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Rows a node keeps for itself beside the projection. Some bookkeeping
// belongs in the node's store but is decided by no log entry: which search
// marks an index has consumed, the vectors an embeddings provider computed
// for a document. Such rows live outside the reserved space (they sort at
// or after "\x01", like the blob rows under "\x01state/"), each package
// under its own prefix, and are written with Keep rather than by a
// projector. A projection rebuilt from the log does not have them; whoever
// keeps them must be able to make them again.

// Keep commits writes the node keeps for itself (see above) in one batch,
// atomically, without syncing: like the projection, what they record can
// be made again after a crash. fn must write only keys at or after "\x01"
// and must not keep b after it returns. Keep runs beside the follower: fn
// must not write keys a projector writes, or the two would race.
func (n *Node) Keep(fn func(b *pebble.Batch) error) error {
	if !n.enter() {
		return closedRefusal()
	}
	defer n.users.Done()
	b := n.db.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		return err
	}
	if err := checkKeys(b); err != nil {
		return fmt.Errorf("state: keep: %w", err)
	}
	return b.Commit(pebble.NoSync)
}

// PositionOf reads the position a View's snapshot is at: it sees every
// write applied at or before that position and none after.
func PositionOf(r pebble.Reader) (uint64, error) {
	pos, _, err := readU64(r, keyPosition)
	return pos, err
}
