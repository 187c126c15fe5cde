package throttle

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// clock is a Throttle's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newAt(burst int, refill time.Duration) (*Throttle, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	th := New(burst, refill)
	th.now = c.now
	return th, c
}

// Issue 26, item 3: a source has burst wrong tries, then one per refill;
// blocked, it is told how long to wait; another source is not slowed by
// it.
func TestWrongTriesRefill(t *testing.T) {
	th, c := newAt(3, 2*time.Second)
	for i := range 3 {
		if _, blocked := th.Blocked("10.0.0.1"); blocked {
			t.Fatalf("blocked before wrong try %d", i+1)
		}
		th.Failed("10.0.0.1")
	}
	wait, blocked := th.Blocked("10.0.0.1")
	if !blocked || wait != 2*time.Second {
		t.Fatalf("after the burst: blocked %v, wait %s", blocked, wait)
	}
	if _, blocked := th.Blocked("10.0.0.2"); blocked {
		t.Fatal("another source is blocked")
	}
	c.t = c.t.Add(1500 * time.Millisecond)
	if wait, blocked := th.Blocked("10.0.0.1"); !blocked || wait != 500*time.Millisecond {
		t.Fatalf("part-way: blocked %v, wait %s", blocked, wait)
	}
	c.t = c.t.Add(500 * time.Millisecond)
	if _, blocked := th.Blocked("10.0.0.1"); blocked {
		t.Fatal("still blocked once a try refilled")
	}
	th.Failed("10.0.0.1")
	if _, blocked := th.Blocked("10.0.0.1"); !blocked {
		t.Fatal("the refilled try, taken, left the source unblocked")
	}
}

// The throttle remembers at most maxSources sources: past that it drops
// those with nothing to remember, and keeps the one still blocked.
func TestSourcesAreBounded(t *testing.T) {
	th, c := newAt(1, time.Second)
	th.Failed("guesser")
	for i := range maxSources - 1 {
		th.Failed(fmt.Sprint("old-", i))
	}
	c.t = c.t.Add(time.Second)
	th.Failed("guesser")
	th.Failed("new")
	if n := len(th.by); n != 2 {
		t.Fatalf("%d sources remembered, want the guesser and the new one", n)
	}
	if _, blocked := th.Blocked("guesser"); !blocked {
		t.Fatal("the guesser was forgotten while blocked")
	}
}

// The source is the connection's address, never a header.
func TestSourceIsTheConnection(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:51234"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if s := Source(r); s != "192.0.2.7" {
		t.Fatalf("source %q", s)
	}
}
