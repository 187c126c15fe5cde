package upstream

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// MCP-7: a server whose start fails is tried again on the restart
// schedule, never at once and never faster: the first retry waits the
// schedule's base, the next twice that. What is checked is what the
// instance did, not what it meant to: the delay each retry event
// announces, the restart time its status shows, and the time that
// actually passed between two failed starts. The base is a whole second
// because the events announce whole seconds.
func TestFailedStartRetriesWaitTheSchedule_MCP7(t *testing.T) {
	const base = time.Second
	in, logs := startTest(t, testSpec(t, "exit-at-start", nil), func(o *Options) {
		o.Schedule = &Schedule{Base: base, Max: 4 * base, Jitter: -1}
	})
	first := awaitEvent(t, logs, "server_start_retry_scheduled", 10*time.Second)
	if first["attempt"] != 1.0 || first["retry_in_seconds"] != 1.0 {
		t.Fatalf("first retry scheduled %v, want attempt 1 in 1 s", first)
	}
	failedAt := eventTime(t, first)
	// The status of the first failure, filed just after its log line,
	// says when the retry is due.
	s := in.Status()
	for deadline := time.Now().Add(5 * time.Second); s.Attempt == 0 && time.Now().Before(deadline); s = in.Status() {
		time.Sleep(5 * time.Millisecond)
	}
	if d := s.NextRestart.Sub(failedAt); s.State != StateDown || s.Attempt != 1 || d < base-50*time.Millisecond || d > base+2*time.Second {
		t.Errorf("status %+v says the retry is %s after the failure, want %s", s, d, base)
	}
	second := awaitEvent(t, logs, "server_restart_failed", 10*time.Second)
	if second["attempt"] != 2.0 || second["retry_in_seconds"] != 2.0 {
		t.Fatalf("second failure %v, want attempt 2 retried in 2 s", second)
	}
	// The clock of the log lines has millisecond precision at worst.
	if gap := eventTime(t, second).Sub(failedAt); gap < base-time.Millisecond {
		t.Fatalf("the retry came %s after the failed start, before the %s the schedule asked for", gap, base)
	}
	if s := in.Status(); s.State != StateDown || s.Attempt != 2 || !strings.Contains(s.Cause, "failed to start") {
		t.Fatalf("status after the second failure: %+v", s)
	}
	if n := len(logs.events("server_restart_failed")); n != 1 {
		t.Fatalf("%d retries within the second wait of 2 s", n)
	}
}

// awaitEvent returns the first log event msg, waiting up to d for it.
func awaitEvent(t *testing.T, logs *logBuf, msg string, d time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if ev := logs.events(msg); len(ev) > 0 {
			return ev[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", msg, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func eventTime(t *testing.T, ev map[string]any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["time"]))
	if err != nil {
		t.Fatalf("event time %v: %v", ev["time"], err)
	}
	return at
}
