package hub

import "sync"

// changeFeed tells whoever watches that what the operator's screen shows
// may read differently now: a server changed state, a catalogue moved, a
// revision was applied. It carries no data, only that something changed,
// so a watcher that missed several changes reads the current state once.
// It never blocks the one who says it, whatever the watchers do.
type changeFeed struct {
	mu  sync.Mutex
	ver uint64
	ch  chan struct{} // closed at the next change
}

func newChangeFeed() *changeFeed { return &changeFeed{ch: make(chan struct{})} }

// changed says something changed: every watcher's channel is closed.
func (c *changeFeed) changed() {
	c.mu.Lock()
	c.ver++
	close(c.ch)
	c.ch = make(chan struct{})
	c.mu.Unlock()
}

// watch is the number of changes so far and a channel closed at the next.
func (c *changeFeed) watch() (uint64, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ver, c.ch
}
