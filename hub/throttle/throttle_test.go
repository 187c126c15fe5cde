package throttle

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// clock is a counter's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// A counter remembers at most maxSources keys: past that it drops those
// with nothing to remember, and keeps the one still spent.
func TestSourcesAreBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	b := newBuckets[string](1, time.Second)
	b.take("guesser", c.now())
	for i := range maxSources - 1 {
		b.take(fmt.Sprint("old-", i), c.now())
	}
	c.t = c.t.Add(time.Second)
	b.take("guesser", c.now())
	b.take("new", c.now())
	if n := len(b.by); n != 2 {
		t.Fatalf("%d keys remembered, want the guesser and the new one", n)
	}
	if _, over := b.take("guesser", c.now()); !over {
		t.Fatal("the guesser was forgotten while spent")
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
