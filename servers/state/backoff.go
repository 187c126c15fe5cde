package state

import "time"

// doubling is the wait between a loop's attempts to start over (the
// projection's follower, the lease watch): the first wait, then twice the
// last, never more than max. A pure schedule, so its numbers are tested
// without waiting them out.
type doubling struct {
	next, max time.Duration
}

// wait returns the wait before the next attempt and moves the schedule on.
func (d *doubling) wait() time.Duration {
	w := d.next
	d.next = min(d.next*2, d.max)
	return w
}
