package launch

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Schedule defaults. The first wait matches the seat heartbeat and the
// longest matches how often a stuck seat's alarm repeats, so a server that
// stays down is reported at that cadence; the spread desynchronises the
// nodes of a fleet that all lost the same vendor at once.
const (
	DefaultBase    = 15 * time.Second
	DefaultMax     = 5 * time.Minute
	DefaultHealthy = 5 * time.Minute
	DefaultJitter  = 0.2
)

// Schedule is one server's restart and retry series: it says how long to
// wait before the next attempt to bring the server back, after it died or
// after a start (or a retry) failed. It holds no timer; the caller sleeps.
//
// The rule: the first death since the series began, and any death after the
// child had been up for Healthy or longer, is restarted at once and starts
// the series again: a server that had been working is worth getting back
// without delay while calls to it are refused. Every other attempt waits Base, doubling after each attempt that
// did not bring it back, capped at Max, and spread by ±Jitter. A child that
// came up after a restart but died again within Healthy counts as such an
// attempt. Reset (an apply) makes the next attempt immediate and begins a
// new series.
//
// Zero fields take the defaults (EnsureDefaults); a negative Jitter turns the
// spread off. Rand returns values in [0, 1) and is injected so tests are
// exact; nil uses math/rand/v2. A Schedule must not be copied after first
// use; its methods are safe to call from several goroutines.
type Schedule struct {
	Base, Max, Healthy time.Duration
	Jitter             float64
	Rand               func() float64

	mu sync.Mutex
	// failures counts attempts since the series began that did not bring
	// the server back; it is the doubling exponent.
	failures int
	// spent is set once the series' free immediate restart has been used.
	spent bool
	// attempt is the ordinal, within the series, of the attempt the last
	// call scheduled.
	attempt int
}

// EnsureDefaults fills every zero field with its default.
func (s *Schedule) EnsureDefaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults()
}

func (s *Schedule) defaults() {
	if s.Base <= 0 {
		s.Base = DefaultBase
	}
	if s.Max <= 0 {
		s.Max = DefaultMax
	}
	if s.Healthy <= 0 {
		s.Healthy = DefaultHealthy
	}
	if s.Jitter == 0 {
		s.Jitter = DefaultJitter
	}
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
}

// Died records that the server's session ended after it had been up for
// uptime, and returns how long to wait before restarting it (0: at once).
func (s *Schedule) Died(uptime time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults()
	if !s.spent || uptime >= s.Healthy {
		s.spent = true
		s.failures = 0
		s.attempt = 1
		return 0
	}
	return s.backoff()
}

// StartFailed records that a start, or an attempt to bring the server back,
// failed, and returns how long to wait before the next one. A failed start
// never earns an immediate retry: the first one waits Base.
func (s *Schedule) StartFailed() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults()
	return s.backoff()
}

// Reset is an apply: the caller tries again at once, and the series starts
// over, so the first death after it is restarted at once and the first
// failure waits Base.
func (s *Schedule) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = 0
	s.spent = false
	s.attempt = 0
}

// Attempt is the ordinal within the current series of the attempt the last
// Died or StartFailed scheduled (0 right after a Reset), for the attempt
// field of the restart log lines.
func (s *Schedule) Attempt() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempt
}

// backoff returns the next spread wait and counts the attempt. Doubling
// stops at Max, so the count can grow without the wait overflowing.
func (s *Schedule) backoff() time.Duration {
	w := s.Base
	for i := 0; i < s.failures && w < s.Max; i++ {
		w *= 2
	}
	if w > s.Max {
		w = s.Max
	}
	s.failures++
	s.attempt++
	return s.spread(w)
}

// spread moves w by up to ±Jitter of itself: a random value r in [0, 1)
// maps to a factor in [1-Jitter, 1+Jitter).
func (s *Schedule) spread(w time.Duration) time.Duration {
	j := s.Jitter
	if j <= 0 {
		return w
	}
	if j > 1 {
		j = 1
	}
	r := s.Rand()
	if !(r >= 0) { // also catches NaN
		r = 0
	}
	if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	out := time.Duration(float64(w) * (1 + j*(2*r-1)))
	// Float rounding can land a value just under 1 on the upper edge;
	// keep the range half-open so the longest wait stays below Max+Jitter.
	if hi := w + time.Duration(float64(w)*j); out >= hi {
		out = hi - 1
	}
	return out
}
