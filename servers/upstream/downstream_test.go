package upstream

import (
	"context"
	"errors"
	"testing"
)

type nopDownstream struct{ Downstream }

func (nopDownstream) ProgressToken() any { return nil }

// Server-initiated messages go to the one call in flight; with several, the
// hub refuses to guess, so no client is shown another's request.
func TestFlightsOnlyWhenUnambiguous(t *testing.T) {
	var fs flights
	if _, err := fs.only(); !errors.Is(err, errNoClient) {
		t.Fatalf("no flight: %v", err)
	}
	a := fs.add(context.Background(), nopDownstream{})
	if f, err := fs.only(); err != nil || f != a {
		t.Fatalf("one flight: %v %v", f, err)
	}
	b := fs.add(context.Background(), nopDownstream{})
	if _, err := fs.only(); !errors.Is(err, errAmbiguous) {
		t.Fatalf("two flights: %v", err)
	}
	fs.remove(a)
	if f, err := fs.only(); err != nil || f != b {
		t.Fatalf("back to one: %v %v", f, err)
	}
	// A call made for no client (an agent's) counts too: its server's
	// request is never handed to the other call's client.
	agent := fs.add(context.Background(), nil)
	if _, err := fs.only(); !errors.Is(err, errAmbiguous) {
		t.Fatalf("a client's call beside an agent's: %v", err)
	}
	fs.remove(b)
	if _, err := fs.only(); !errors.Is(err, errNoClient) {
		t.Fatalf("an agent's call alone: %v", err)
	}
	fs.remove(agent)
}
