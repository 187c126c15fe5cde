package state

import (
	"testing"
	"time"
)

// The retry schedules double from their first wait up to their cap, and
// stay there.
func TestDoublingSchedules(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		d    doubling
		want []time.Duration
	}{
		{"the follower", followRetry(), []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"the lease watch", watchRetry(300 * ms), []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms}},
		{"a cap below the first wait", doubling{next: 100 * ms, max: 10 * ms}, []time.Duration{100 * ms, 10 * ms, 10 * ms}},
	} {
		for i, want := range tc.want {
			if got := tc.d.wait(); got != want {
				t.Errorf("%s: wait %d = %v, want %v", tc.name, i+1, got, want)
			}
		}
	}
}
