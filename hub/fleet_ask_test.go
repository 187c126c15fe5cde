package hub

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Issue 27, item 3 (FLT-1): a question about a seat reaches the node that
// holds it, whichever node it is asked of, and only that node answers; a
// seat no node holds is ErrNoHolder, and a holder that does not answer
// (nothing on it answers that kind) is ErrNoAnswer, at once rather than
// after a timeout. When the seat moves, the question follows it.
func TestFleetAsksTheSeatHolder(t *testing.T) {
	nodes := startTestFleet(t, true, "a", "b")
	a, b := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ask := func(from *testNode) (string, error) {
		reply, err := from.hub.AskSeatHolder(ctx, "alice", "probe", []byte("who runs alice?"))
		return string(reply), err
	}

	if _, err := ask(b); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("asked about a seat nobody holds: %v", err)
	}
	if err := a.hub.ClaimSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := ask(b); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("asked of a holder that answers nothing: %v", err)
	}
	if took := time.Since(began); took >= askWait {
		t.Fatalf("a holder with nobody answering took %v to be found silent", took)
	}
	for _, n := range nodes {
		if err := n.hub.AnswerSeatQuestions("probe", func(q []byte) []byte { return []byte(n.name + " answers: " + string(q)) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range nodes {
		if got, err := ask(from); err != nil || got != "a answers: who runs alice?" {
			t.Fatalf("asked of %s: %q, %v", from.name, got, err)
		}
	}

	// The seat moves: the question goes where it is now.
	if err := a.hub.ReleaseSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.hub.ClaimSeat(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got, err := ask(a); err != nil || got != "b answers: who runs alice?" {
		t.Fatalf("asked of a after the move: %q, %v", got, err)
	}
}

// A node alone has nobody to ask: it runs every seat it holds itself.
func TestAloneNodeHasNoSeatHolderToAsk(t *testing.T) {
	h, err := New(context.Background(), Options{Company: fleetCompany(t),
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.AskSeatHolder(t.Context(), "alice", "probe", nil); !errors.Is(err, ErrNotFleet) {
		t.Fatalf("asked alone: %v", err)
	}
	if err := h.AnswerSeatQuestions("probe", func([]byte) []byte { return nil }); !errors.Is(err, ErrNotFleet) {
		t.Fatalf("answering alone: %v", err)
	}
}
