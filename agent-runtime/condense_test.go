package agent

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
)

// OUT-2: a long text is condensed by the reader's seat's auxiliary model,
// piece by piece on whole lines, each piece told its share; the calls are
// charged to the seat; the same text again is answered from the cache,
// costing nothing; a caller with no seat, a text past what one condensing
// reads, and a failed call are refused, so the caller shows the text
// another whole way.
func TestCondense(t *testing.T) {
	var fail atomic.Bool
	var n atomic.Int32
	h := newHarness(t, func(modeltest.Conversation) modeltest.Reply {
		if fail.Load() {
			return modeltest.Reply{Status: 500}
		}
		return modeltest.Reply{Text: fmt.Sprintf("Condensed %d.", n.Add(1)), Input: 1000, Output: 20}
	}, nil, nil)
	k := NewCondenser(AuxiliaryDeps{
		Model: func(seat string) (ModelSpec, bool, error) {
			return ModelSpec{API: "openai", Provider: "fake", BaseURL: h.model.OpenAIBase(), Model: "aux"}, seat == "alan", nil
		},
		Runtime: func() *Runtime { return h.rt },
	})
	seat := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "turn-c"}
	text := strings.Repeat("A line of the report, with its figures: 42.\n", 2500) // 110,000 bytes: two pieces

	got, model, err := k.Condense(t.Context(), seat, text, 64<<10)
	if err != nil || got != "Condensed 1.\n\nCondensed 2." || !strings.Contains(model, "aux") {
		t.Fatalf("condensed %q by %q: %v", got, model, err)
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want one per piece", len(reqs))
	}
	var whole strings.Builder
	for i, r := range reqs {
		ask := r.Messages[0].Text
		piece := ask[strings.Index(ask, "--- the text ---\n")+len("--- the text ---\n") : strings.LastIndex(ask, "\n--- end of the text ---")]
		if r.System != condenseSystem || !strings.Contains(ask, fmt.Sprintf("part %d of 2", i+1)) || len(piece) > condensePieceBytes || !strings.HasSuffix(piece, "\n") {
			t.Fatalf("call %d: %d-byte piece, asked %.120q", i, len(piece), ask)
		}
		whole.WriteString(piece)
	}
	if whole.String() != text {
		t.Fatal("the pieces are not the text, in order")
	}
	if spent := h.rt.opts.Budget.Spent("alan", "hour", time.Now()); spent != 2*1020 {
		t.Fatalf("the seat was charged %d tokens, want %d", spent, 2*1020)
	}

	if again, _, err := k.Condense(t.Context(), seat, text, 64<<10); err != nil || again != got || h.model.Count() != 2 {
		t.Fatalf("the same text again: %q, %v, %d calls", again, err, h.model.Count())
	}

	operator := authority.Caller{Seat: "token:ci", Kind: authority.KindOperator, Requester: "token:ci", OperatorID: "ci"}
	tooLong := strings.Repeat("x\n", condensePieceBytes*condensePieces/2+1)
	for name, try := range map[string]func() error{
		"no seat":  func() error { _, _, err := k.Condense(t.Context(), operator, text, 64<<10); return err },
		"too long": func() error { _, _, err := k.Condense(t.Context(), seat, tooLong, 64<<10); return err },
		"no model": func() error {
			_, _, err := k.Condense(t.Context(), authority.Caller{Seat: "linus", Kind: authority.KindAgent}, text, 64<<10)
			return err
		},
	} {
		if err := try(); !errors.Is(err, authority.ErrUnavailable) {
			t.Errorf("%s: %v, want unavailable", name, err)
		}
	}
	if h.model.Count() != 2 {
		t.Fatalf("a refused condensing called the model: %d calls", h.model.Count())
	}

	fail.Store(true)
	other := strings.Repeat("Another report.\n", 5000)
	if _, _, err := k.Condense(t.Context(), seat, other, 64<<10); err == nil || !strings.Contains(err.Error(), "answered HTTP 500") {
		t.Fatalf("a failed call: %v", err)
	}
	fail.Store(false)
	if got, _, err := k.Condense(t.Context(), seat, other, 64<<10); err != nil || !strings.HasPrefix(got, "Condensed") {
		t.Fatalf("a failure was cached: %q, %v", got, err)
	}
}
