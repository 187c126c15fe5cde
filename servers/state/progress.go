package state

import "context"

// Progress is where the log ends and how far this node's projection has
// applied it, for an operator watching a node fall behind: the distance
// between them is what a read on this node does not see yet. It asks the
// log, so it can fail (a log that is closing or unreachable).
func (n *Node) Progress(ctx context.Context) (logged, projected uint64, err error) {
	if !n.enter() {
		return 0, 0, closedRefusal()
	}
	defer n.users.Done()
	projected = n.Position()
	logged, err = n.log.Last(ctx)
	return logged, projected, err
}
