package upstream

import (
	"context"
	"errors"
	"testing"
)

// Issue 36 finding 3: a server's message that came on no call's stream
// belongs to the call whose progress token it carries, and to none
// otherwise, even with one call in flight: never a guess.
func TestFlightForNamesTheCall(t *testing.T) {
	in := &Instance{}
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("no flight: %v", err)
	}
	a := in.flights.add(context.Background(), tokenDownstream{})
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("one flight, a message naming none: %v", err)
	}
	b := in.flights.add(context.Background(), tokenDownstream{})
	for _, f := range []*flight{a, b} {
		if got, err := in.flightFor(nil, map[string]any{"progressToken": f.token}); err != nil || got != f {
			t.Fatalf("by token %q: %v %v", f.token, got, err)
		}
	}
	if _, err := in.flightFor(nil, map[string]any{"progressToken": "crewlet-999"}); !errors.Is(err, errUnrouted) {
		t.Fatalf("a token of no call: %v", err)
	}
	// A call made for no client (an agent's): nobody to hand it to.
	agent := in.flights.add(context.Background(), nil)
	if _, err := in.flightFor(agent, nil); !errors.Is(err, errNoClient) {
		t.Fatalf("an agent's call: %v", err)
	}
	in.flights.remove(a)
	in.flights.remove(b)
	in.flights.remove(agent)
}

type tokenDownstream struct{ Downstream }

func (tokenDownstream) ProgressToken() any { return "p" }
