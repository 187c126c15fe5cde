package hub

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// refusalLog bounds what refused requests (a Host or Origin not allowed, a
// missing or unknown bearer token) add to the hub's log. Anyone who can
// reach the port can send them, as fast and as large as they like, so a
// line per request would let a stranger fill the disk: each reason is
// logged at most once per interval, and the next line it logs says how
// many were left out meanwhile. A line never carries a header's value,
// only its size, and a path only clipped.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu sync.Mutex
	// by reason; the reasons are the guard's own fixed words, so these
	// maps stay a handful of entries whatever is sent.
	last       map[string]time.Time
	suppressed map[string]int
}

// refusalLogEvery is how often each reason is logged at most.
const refusalLogEvery = 10 * time.Second

// maxLoggedPath is how much of a refused request's path is logged.
const maxLoggedPath = 128

func newRefusalLog(log *slog.Logger, every time.Duration) *refusalLog {
	return &refusalLog{log: log, every: every, now: time.Now, last: map[string]time.Time{}, suppressed: map[string]int{}}
}

// note logs one refusal, unless its reason was logged less than an
// interval ago, in which case it is only counted.
func (l *refusalLog) note(level slog.Level, event, reason string, attrs ...any) {
	l.mu.Lock()
	now := l.now()
	if last, ok := l.last[reason]; ok && now.Sub(last) < l.every {
		l.suppressed[reason]++
		l.mu.Unlock()
		return
	}
	l.last[reason] = now
	n := l.suppressed[reason]
	delete(l.suppressed, reason)
	l.mu.Unlock()
	args := append([]any{"reason", reason}, attrs...)
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	l.log.Log(context.Background(), level, event, args...)
}

// clip shortens what a stranger chose (a path) to a loggable size, saying
// how long it was.
func clip(s string) string {
	if len(s) <= maxLoggedPath {
		return s
	}
	// Cut on a byte boundary the JSON handler will escape if need be; the
	// marker says it was cut and from how much (OUT-2).
	return fmt.Sprintf("%s…(%d bytes)", s[:maxLoggedPath], len(s))
}
