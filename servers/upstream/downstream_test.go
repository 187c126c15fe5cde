package upstream

import (
	"context"
	"errors"
	"testing"
)

// Issue 36 finding 3: a server's message that came on no call's stream
// belongs to the call whose progress token it carries; failing that, to
// the one call in flight only while every call the server carried was
// one caller's; otherwise to none. Never a guess across callers.
func TestFlightForNamesTheCall(t *testing.T) {
	in := &Instance{}
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("no flight: %v", err)
	}
	a := in.flights.add(context.Background(), tokenDownstream{caller: "admin"})
	if got, err := in.flightFor(nil, nil); err != nil || got != a {
		t.Fatalf("one caller's one flight, a message naming none: %v %v; want that flight", got, err)
	}
	a2 := in.flights.add(context.Background(), tokenDownstream{caller: "admin"})
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("two flights of one caller, a message naming none: %v", err)
	}
	in.flights.remove(a2)
	b := in.flights.add(context.Background(), tokenDownstream{caller: "bob"})
	for _, f := range []*flight{a, b} {
		if got, err := in.flightFor(nil, map[string]any{"progressToken": f.token}); err != nil || got != f {
			t.Fatalf("by token %q: %v %v", f.token, got, err)
		}
	}
	if _, err := in.flightFor(nil, map[string]any{"progressToken": "crewlet-999"}); !errors.Is(err, errUnrouted) {
		t.Fatalf("a token of no call: %v", err)
	}
	// Once bob has called, a message naming no call is nobody's, even
	// with bob's the only call left in flight: it may be a late line of
	// admin's.
	in.flights.remove(a)
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("the one flight of a server two callers used, a message naming none: %v", err)
	}
	// A call made for no client (an agent's): nobody to hand it to.
	agent := in.flights.add(context.Background(), nil)
	if _, err := in.flightFor(agent, nil); !errors.Is(err, errNoClient) {
		t.Fatalf("an agent's call: %v", err)
	}
	in.flights.remove(b)
	in.flights.remove(agent)
}

// Issue 36 finding 3: a call made for no client (an agent's turn) is a
// caller too: after one, a message naming no call reaches no client.
func TestFlightAfterAnAgentsCallIsNobodys(t *testing.T) {
	in := &Instance{}
	agent := in.flights.add(context.Background(), nil)
	in.flights.remove(agent)
	in.flights.add(context.Background(), tokenDownstream{caller: "admin"})
	if _, err := in.flightFor(nil, nil); !errors.Is(err, errUnrouted) {
		t.Fatalf("a message naming no call after an agent's call: %v", err)
	}
}

type tokenDownstream struct {
	Downstream
	caller string
}

func (tokenDownstream) ProgressToken() any { return "p" }
func (d tokenDownstream) Caller() string   { return d.caller }
