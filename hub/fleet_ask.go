package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// Questions about a seat's running work, asked of the node that holds it
// (issue 27, item 3). A decision about a turn (steer_turn) can reach any
// node, but only the node running the seat has the turn: the node asked
// names the seat's holder from the lease bucket and sends the question
// over the fleet's pub/sub to that node alone, which answers from what
// it runs. No holder means nothing runs the seat; a holder that does not
// answer within askWait is unreachable (its runtime not started, or cut
// off from the fleet) — two different answers for the person asking.

// askSubject prefixes a question for one node: askSubject + node + "." +
// kind.
const askSubject = "crewlet.ask."

// askWait bounds how long a question waits for the holder's answer: an
// answer is read from memory, so a holder that is up answers in
// milliseconds.
const askWait = 5 * time.Second

// ErrNoHolder marks a question about a seat no node holds.
var ErrNoHolder = errors.New("hub: no node of the fleet holds the seat")

// ErrNoAnswer marks a question the seat's holder did not answer.
var ErrNoAnswer = errors.New("hub: the seat's holder did not answer")

// ErrNotFleet marks a question asked of a node that is not one of a fleet:
// it runs every seat it holds itself.
var ErrNotFleet = errors.New("hub: this node is not one of a fleet")

// AnswerSeatQuestions has fn answer every question of a kind other nodes
// (and this one) ask about the seats this node holds, until the hub
// closes. fn runs on the bus's goroutine and must answer at once.
func (h *Hub) AnswerSeatQuestions(kind string, fn func(question []byte) []byte) error {
	if h.fleet == nil {
		return ErrNotFleet
	}
	stop, err := h.fleet.f.Bus.Answer(askSubject+h.fleet.f.Node+"."+kind, fn)
	if err != nil {
		return err
	}
	h.fleet.askMu.Lock()
	h.fleet.answering = append(h.fleet.answering, stop)
	h.fleet.askMu.Unlock()
	return nil
}

// AskSeatHolder sends a question of a kind to the node holding seat and
// answers its reply: ErrNoHolder when no node holds the seat (asked of
// the lease bucket itself, so a seat just moved is found where it is
// now), ErrNoAnswer when its holder does not answer, ErrNotFleet alone.
func (h *Hub) AskSeatHolder(ctx context.Context, seat, kind string, question []byte) ([]byte, error) {
	if h.fleet == nil {
		return nil, ErrNotFleet
	}
	f := h.fleet.f
	cctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	// The bucket is asked for half the wait at most: while it elects a
	// leader (its last one died, perhaps with the holder) it answers
	// nothing, and the question still needs its time.
	hctx, hcancel := context.WithTimeout(cctx, askWait/2)
	holder, err := f.Leases.Holder(hctx, seat)
	hcancel()
	if err != nil {
		// The bucket did not answer: what the watch last saw stands in.
		holder = f.Leases.Holders()[seat]
	}
	if holder == "" {
		return nil, fmt.Errorf("%w: %s", ErrNoHolder, seat)
	}
	reply, err := f.Bus.Request(cctx, askSubject+holder+"."+kind, question)
	if errors.Is(err, state.ErrNoAnswer) {
		return nil, fmt.Errorf("%w: node %s holds %s: %w", ErrNoAnswer, holder, seat, err)
	}
	return reply, err
}
