package launch

import (
	"math"
	"sync"
	"testing"
	"time"
)

type scheduleFile struct {
	Cases []struct {
		Name   string `json:"name"`
		Config *struct {
			Base    string  `json:"base"`
			Max     string  `json:"max"`
			Healthy string  `json:"healthy"`
			Jitter  float64 `json:"jitter"`
		} `json:"config"`
		// Rand is the fake random source's one answer.
		Rand  float64 `json:"rand"`
		Steps []struct {
			Op     string `json:"op"` // died | start_failed | reset
			Uptime string `json:"uptime"`
			// Want is the exact wait; Min and Below bound it instead
			// (inclusive, exclusive) where float rounding makes exact
			// values meaningless.
			Want    string `json:"want"`
			Min     string `json:"min"`
			Below   string `json:"below"`
			Attempt *int   `json:"attempt"`
		} `json:"steps"`
	} `json:"cases"`
}

func dur(t *testing.T, s string) time.Duration {
	t.Helper()
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSchedule walks every step of MCP-7 and MCP-9 from
// testdata/schedule.json with a fake random source.
func TestSchedule(t *testing.T) {
	var f scheduleFile
	loadCases(t, "schedule.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Rand
			s := &Schedule{Rand: func() float64 { return r }}
			if c.Config != nil {
				s.Base, s.Max, s.Healthy = dur(t, c.Config.Base), dur(t, c.Config.Max), dur(t, c.Config.Healthy)
				s.Jitter = c.Config.Jitter
			}
			for i, st := range c.Steps {
				var got time.Duration
				switch st.Op {
				case "died":
					got = s.Died(dur(t, st.Uptime))
				case "start_failed":
					got = s.StartFailed()
				case "reset":
					s.Reset()
				default:
					t.Fatalf("step %d: unknown op %q", i, st.Op)
				}
				switch {
				case st.Want != "":
					if want := dur(t, st.Want); got != want {
						t.Errorf("step %d (%s): wait %v, want %v", i, st.Op, got, want)
					}
				case st.Min != "" || st.Below != "":
					if got < dur(t, st.Min) || got >= dur(t, st.Below) {
						t.Errorf("step %d (%s): wait %v, want in [%s, %s)", i, st.Op, got, st.Min, st.Below)
					}
				case st.Op != "reset":
					t.Fatalf("step %d: no expectation", i)
				}
				if st.Attempt != nil && s.Attempt() != *st.Attempt {
					t.Errorf("step %d (%s): attempt %d, want %d", i, st.Op, s.Attempt(), *st.Attempt)
				}
			}
		})
	}
}

// TestScheduleDefaults: a zero Schedule takes 15s, 5m, 5m and a fifth
// (MCP-7), and EnsureDefaults leaves configured values alone.
func TestScheduleDefaults(t *testing.T) {
	var s Schedule
	s.EnsureDefaults()
	if s.Base != 15*time.Second || s.Max != 5*time.Minute || s.Healthy != 5*time.Minute || s.Jitter != 0.2 || s.Rand == nil {
		t.Errorf("defaults = %v %v %v %v rand set=%v", s.Base, s.Max, s.Healthy, s.Jitter, s.Rand != nil)
	}
	c := Schedule{Base: time.Second, Max: time.Minute, Healthy: time.Hour, Jitter: 0.1}
	c.EnsureDefaults()
	if c.Base != time.Second || c.Max != time.Minute || c.Healthy != time.Hour || c.Jitter != 0.1 {
		t.Errorf("configured values changed: %v %v %v %v", c.Base, c.Max, c.Healthy, c.Jitter)
	}
	// The real random source stays within the spread too.
	var r Schedule
	for range 200 {
		if w := r.StartFailed(); w < 12*time.Second || w >= 18*time.Second {
			t.Fatalf("first wait %v outside [12s, 18s)", w)
		}
		for range 6 {
			r.StartFailed()
		}
		if w := r.StartFailed(); w < 4*time.Minute || w >= 6*time.Minute {
			t.Fatalf("capped wait %v outside [4m, 6m)", w)
		}
		r.Reset()
	}
}

// TestScheduleJitterBounds: whatever the random source says, every wait
// stays within ±Jitter of its step and never reaches six minutes (MCP-7).
// Out-of-range answers (negative, 1 and above, NaN) are clamped rather than
// trusted.
func TestScheduleJitterBounds(t *testing.T) {
	rs := []float64{0, 1e-12, 0.25, 0.5, 0.75, math.Nextafter(1, 0), 1, 1.5, -0.5, math.NaN(), math.Inf(1)}
	steps := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for _, r := range rs {
		s := &Schedule{Rand: func() float64 { return r }}
		for i, base := range steps {
			w := s.StartFailed()
			lo := time.Duration(float64(base) * 0.8)
			hi := time.Duration(float64(base) * 1.2)
			if w < lo-time.Nanosecond || w >= hi || w >= 6*time.Minute {
				t.Errorf("rand %v step %d: wait %v outside [%v, %v)", r, i, w, lo, hi)
			}
		}
	}
}

// TestScheduleNoOverflow: a server that fails for a very long time stays at
// the ceiling; the doubling never wraps around.
func TestScheduleNoOverflow(t *testing.T) {
	s := &Schedule{Rand: func() float64 { return 0.5 }}
	for i := range 10000 {
		if w := s.StartFailed(); w <= 0 || w > 5*time.Minute {
			t.Fatalf("attempt %d: wait %v", i, w)
		}
	}
}

// TestScheduleConcurrent: a supervisor and an apply may drive one Schedule
// from different goroutines (run with -race).
func TestScheduleConcurrent(t *testing.T) {
	s := &Schedule{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				switch (g + i) % 4 {
				case 0:
					s.Died(time.Duration(i) * time.Second)
				case 1:
					s.StartFailed()
				case 2:
					s.Reset()
				default:
					_ = s.Attempt()
				}
			}
		}()
	}
	wg.Wait()
}
