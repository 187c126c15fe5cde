package upstream

import (
	"context"
	"slices"
	"sync"
)

// A server may change its tools while it runs and say so with
// notifications/tools/list_changed. The instance lists them again and
// hands the new list to OnTools as a start that lists different tools
// would, so a tool added at runtime is filed (held for review on a pinned
// server) and a tool removed is withdrawn at once instead of staying
// offered and failing (issue 36, finding 9).
//
// The notification is read off the wire by the connection's tap, which
// must not wait for the listing it asks for (the answer comes on the
// same reader), so the listing runs on a goroutine of its own. Only one
// runs per connection at a time; notifications that come meanwhile fold
// into one more listing after it. A notification before the connection's
// first listing is over is folded into that listing's end.

// relister is a connection's state of listing again.
type relister struct {
	mu sync.Mutex
	// ready is set once the connection's first listing was handed on.
	ready bool
	// running says a listing is under way; again that another is owed.
	running, again bool
}

// toolsListChanged is the tap's hook for the server's list_changed on
// connection c.
func (i *Instance) toolsListChanged(c *conn) {
	r := &c.relist
	r.mu.Lock()
	if !r.ready || r.running {
		r.again = true
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	i.wg.Go(func() { i.relistLoop(c) })
}

// relistReady marks c's first listing handed on, and lists again at once
// if the server said its list changed meanwhile.
func (i *Instance) relistReady(c *conn) {
	r := &c.relist
	r.mu.Lock()
	r.ready = true
	owed := r.again && !r.running
	if owed {
		r.again, r.running = false, true
	}
	r.mu.Unlock()
	if owed {
		i.wg.Go(func() { i.relistLoop(c) })
	}
}

func (i *Instance) relistLoop(c *conn) {
	for {
		i.relistOnce(c)
		r := &c.relist
		r.mu.Lock()
		if !r.again {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.again = false
		r.mu.Unlock()
	}
}

// relistOnce lists c's tools and, if c is still the instance's session
// and the list moved, hands it on.
func (i *Instance) relistOnce(c *conn) {
	ctx, cancel := context.WithTimeout(context.Background(), i.opts.StartTimeout)
	defer cancel()
	// The listing ends with the session: a server that stopped answering
	// holds nothing up past its restart.
	go func() {
		select {
		case <-c.ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	var tools []Tool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			i.log.Warn("server_tools_unlisted", "reason", "the server said its tools changed, and listing them again failed: "+i.scrub(err.Error()))
			return
		}
		tools = append(tools, Tool{Def: t, Annotations: c.raw(t.Name)})
	}
	i.listMu.Lock()
	defer i.listMu.Unlock()
	i.mu.Lock()
	if i.sess != c.sess {
		// A restart replaced the session; its own listing stands.
		i.mu.Unlock()
		return
	}
	old := i.tools
	changed := !sameTools(old, tools)
	if changed {
		i.tools = tools
	}
	i.mu.Unlock()
	if !changed {
		return
	}
	added, removed := diffTools(old, tools)
	i.log.Info("server_catalogue_changed", "added", added, "removed", removed, "cause", "the server said its tools changed (notifications/tools/list_changed)")
	if i.opts.OnTools != nil {
		i.opts.OnTools(slices.Clone(tools))
	}
}
