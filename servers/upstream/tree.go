package upstream

import (
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"
)

// tree is what the hub has seen of a stdio child's process tree. Signalling
// the child's process group reaches what stays in it, but a process that
// called setsid (a daemon, a helper that detaches) has left the group, and
// one whose parent died has left the tree: each would outlive the stop,
// holding the credentials the child was given. So the tree is walked
// while the child runs, and every process ever seen below the leader is
// remembered by pid and start time until it is gone; the stop signals
// them beside the group, and the ledger, if any, writes them down for a
// node that dies without stopping its children.
type tree struct {
	leader proc

	mu   sync.Mutex
	seen map[int]proc // the leader's descendants, by pid
}

func newTree(leader proc) *tree {
	return &tree{leader: leader, seen: map[int]proc{}}
}

// observe walks the tree from the leader, adds what is new and forgets
// what has ended; it reports whether the set changed.
func (t *tree) observe() bool {
	found := map[int]proc{}
	if t.leader.running() {
		queue := childrenOf(t.leader.PID)
		for len(queue) > 0 && len(found) < maxTree {
			pid := queue[0]
			queue = queue[1:]
			if _, dup := found[pid]; dup {
				continue
			}
			if p, _, ok := identify(pid); ok {
				found[pid] = p
				queue = append(queue, childrenOf(pid)...)
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	for pid, p := range found {
		if old, ok := t.seen[pid]; !ok || old != p {
			t.seen[pid] = p
			changed = true
		}
	}
	for pid, p := range t.seen {
		if _, now := found[pid]; !now && !p.running() {
			delete(t.seen, pid)
			changed = true
		}
	}
	return changed
}

// maxTree bounds one walk, so a fork bomb under a child costs the hub a
// bounded look, not an unbounded one; the group signal still reaches
// every process that stayed in the group.
const maxTree = 4096

// procs is the leader and every descendant seen, leader first.
func (t *tree) procs() []proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []proc{t.leader}
	for _, pid := range slices.Sorted(maps.Keys(t.seen)) {
		out = append(out, t.seen[pid])
	}
	return out
}

// signal sends sig to every descendant seen that still runs, whether or
// not it is still in the leader's group.
func (t *tree) signal(sig syscall.Signal) {
	for _, p := range t.procs()[1:] {
		p.signal(sig)
	}
}

// waitGone waits up to d for every process seen to end.
func (t *tree) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		alive := false
		for _, p := range t.procs() {
			alive = alive || p.running()
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
