package upstream

import (
	"context"
	"time"
)

// supervise is the instance's one goroutine: start, watch, restart.
func (i *Instance) supervise(ctx context.Context) {
	defer i.setStatus(func(s *Status) { *s = Status{State: StateStopped, Since: time.Now(), Cause: "it was stopped"} })
	spec := i.opts.Spec
	if !spec.CanLaunch() {
		reason := "the spec can never launch: a stdio server needs a command and an http server a url"
		i.log.Error("mcp_server_failed", "reason", reason)
		i.setStatus(func(s *Status) { *s = Status{State: StateFailed, Cause: reason, Since: time.Now()} })
		<-ctx.Done()
		return
	}
	var downSince time.Time
	var was string
	failedBefore := false // a start failed already: later failures are retries
	for {
		if (i.started || failedBefore) && !i.awaitLease(ctx) {
			return
		}
		c, err := i.open(ctx)
		if ctx.Err() != nil {
			if c != nil {
				i.closeConn(c)
			}
			return
		}
		if err != nil {
			tail := ""
			if c != nil {
				// A handshake can succeed and the listing fail after it:
				// the session (and, for a remote, its server-side state)
				// is closed either way.
				if c.child != nil {
					tail = c.child.tail.String()
				}
				i.closeConn(c)
			}
			if tail != "" {
				i.log.Error("server_stderr_tail", "stderr_tail", tail)
			}
			delay := i.opts.Schedule.StartFailed()
			attempt := i.opts.Schedule.Attempt()
			if i.started || failedBefore {
				i.log.Error("server_restart_failed", "attempt", attempt, "error", i.scrub(err.Error()), "retry_in_seconds", int(delay.Seconds()))
			} else {
				i.log.Error("mcp_server_failed", "reason", i.scrub(err.Error()))
			}
			// Every wait is said, not only the first (MCP-11): a run of
			// them is how an operator tells a server that cannot start
			// from one that failed once.
			i.log.Info(i.retryEvent(), "attempt", attempt, "retry_in_seconds", int(delay.Seconds()))
			failedBefore = true
			if downSince.IsZero() {
				downSince = time.Now()
			}
			i.setStatus(func(s *Status) {
				*s = Status{State: StateDown, Cause: "it failed to start: " + i.scrub(err.Error()), Since: downSince, NextRestart: time.Now().Add(delay), Attempt: attempt}
			})
			if !i.wait(ctx, delay) {
				return
			}
			continue
		}

		upAt := time.Now()
		if i.started {
			i.log.Info("server_restarted", "attempt", i.opts.Schedule.Attempt(), "down_seconds", int(time.Since(downSince).Seconds()), "was", was)
		}
		i.started = true
		downSince, was = time.Time{}, ""
		i.setStatus(func(s *Status) { *s = Status{State: StateRunning, Since: upAt} })
		if i.opts.OnConnected != nil {
			i.opts.OnConnected()
		}

		// Death watch (MCP-5): the process exiting, or the session ending
		// while the process runs on.
		var exited <-chan struct{}
		if c.child != nil {
			exited = c.child.done
		}
		select {
		case <-ctx.Done():
			// Stopped is in status before the calls in flight are told,
			// so they say the engine stopped it.
			i.setStatus(func(s *Status) {
				*s = Status{State: StateStopped, Since: time.Now(), Cause: "it was stopped"}
				i.forgetLocked(c)
			})
			i.closeConn(c)
			close(c.recorded)
			return
		case <-exited:
			// The process is gone, but what it wrote before it went may
			// still be in its pipe: the session reads to the pipe's end
			// and ends by itself there. Until it has, a call's last
			// progress and log lines are unread, and declaring the death
			// now would answer the call before them and close the
			// session under its reader, which drops what is queued. A
			// grandchild holding the pipe open keeps it from ending:
			// the wait is bounded.
			select {
			case <-c.ended:
			case <-time.After(exitGrace):
			}
		case <-c.ended:
		}
		cause := "its session ended"
		if c.child != nil {
			select {
			case <-c.child.done:
				cause = "its process " + c.child.exitDescription()
			// A killed process's pipes close before it is reaped, and on a
			// loaded machine the reaping can lag by a good part of a
			// second: the grace is long enough not to misname a death.
			case <-time.After(exitGrace):
				cause = "it closed its session while its process ran on"
			}
		}
		uptime := time.Since(upAt)
		tail := ""
		if c.child != nil {
			tail = c.child.tail.String()
		}
		i.log.Error("server_exited", "cause", cause, "up_seconds", int(uptime.Seconds()), "stderr_tail", tail)
		downSince, was = time.Now(), cause
		delay := i.opts.Schedule.Died(uptime)
		next := time.Now().Add(delay)
		i.setStatus(func(s *Status) {
			*s = Status{State: StateDown, Cause: cause, Since: downSince, NextRestart: next, Attempt: i.opts.Schedule.Attempt()}
			i.forgetLocked(c)
		})
		close(c.recorded)
		// Reap whatever the old process left behind before restarting.
		i.closeConn(c)
		if !i.wait(ctx, delay) {
			return
		}
	}
}

// exitGrace is how long a session's end waits for its process to exit
// before the session alone is blamed.
const exitGrace = 2 * time.Second

// awaitLease holds a restart back until this node proves it holds the
// seat's lease, asking again one heartbeat later each time; false means the
// instance was closed meanwhile (its seat was let go).
func (i *Instance) awaitLease(ctx context.Context) bool {
	for i.opts.Lease != nil && !i.opts.Lease() {
		i.log.Warn("server_restart_held_back", "retry_in_seconds", int(i.opts.Heartbeat.Seconds()))
		t := time.NewTimer(i.opts.Heartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

// wait sleeps for d, or until a Retry or Close; false means closed.
func (i *Instance) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-i.retry:
	}
	return true
}

// retryEvent names the wait after a failed start: a seat's child is
// retried by its seat, a shared server by the hub.
func (i *Instance) retryEvent() string {
	if i.opts.Seat != "" {
		return "mcp_seat_retry_scheduled"
	}
	return "server_start_retry_scheduled"
}
