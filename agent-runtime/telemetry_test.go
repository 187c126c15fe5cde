package agent

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// observed records what an Observer is told.
type observed struct {
	mu    sync.Mutex
	turns []string
	calls []observedCall
}

type observedCall struct {
	provider, model, outcome string
	input, output            int64
}

func (o *observed) TurnEnded(outcome string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns = append(o.turns, outcome)
}

func (o *observed) ModelCalled(provider, model, outcome string, took time.Duration, input, output int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observedCall{provider, model, outcome, input, output})
}

// The observer is told of every model call a turn sends, with what it
// spent as the provider reported it, and of the turn's end.
func TestObserverCountsTurnsAndCalls(t *testing.T) {
	first := call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "on it"})
	first.Input, first.Output = 100, 5
	last := done
	last.Input, last.Output = 130, 2
	obs := &observed{}
	h := newHarness(t, modeltest.Steps(first, last), []Tool{commentTool}, func(o *Options) { o.Observer = obs })
	if rec := h.turn(); rec.Outcome != Delivered {
		t.Fatalf("turn %+v", rec)
	}
	want := []observedCall{{"fake", "m", ModelCallOK, 100, 5}, {"fake", "m", ModelCallOK, 130, 2}}
	if len(obs.calls) != 2 || obs.calls[0] != want[0] || obs.calls[1] != want[1] {
		t.Fatalf("calls observed %+v, want %+v", obs.calls, want)
	}
	if len(obs.turns) != 1 || obs.turns[0] != Delivered {
		t.Fatalf("turns observed %v", obs.turns)
	}
}

// A model endpoint that is down ends the turn failed with a reason a
// person can act on: the endpoint, the provider and model as the company
// file names them, that nothing listens there, and which key to mend.
func TestModelDownSaysWhere(t *testing.T) {
	obs := &observed{}
	h := newHarness(t, modeltest.Steps(done), nil, func(o *Options) { o.Observer = obs })
	// The stand-in model, stopped: its loopback port refuses connections.
	h.model.Close()
	rec := h.turn()
	if rec.Outcome != Failed {
		t.Fatalf("turn %+v", rec)
	}
	for _, want := range []string{h.model.OpenAIBase(), `provider "fake"`, `model "m"`, "refused the connection", `provider "fake"'s base_url`, "wake the seat again"} {
		if !strings.Contains(rec.Reason, want) {
			t.Errorf("the reason does not say %q: %s", want, rec.Reason)
		}
	}
	if strings.Contains(rec.Reason, "dial tcp") {
		t.Errorf("the reason is the client's error, not the hub's sentence: %s", rec.Reason)
	}
	if len(obs.calls) != 1 || obs.calls[0].outcome != ModelCallUnreachable || len(obs.turns) != 1 || obs.turns[0] != Failed {
		t.Fatalf("observed calls %+v, turns %v", obs.calls, obs.turns)
	}
}

// An endpoint that answers an error status: the reason quotes the
// status and the provider's own message, and says what to check for it.
func TestModelRefusalSaysWhy(t *testing.T) {
	obs := &observed{}
	h := newHarness(t, modeltest.Steps(modeltest.Reply{Status: 404}), nil, func(o *Options) { o.Observer = obs })
	rec := h.turn()
	if rec.Outcome != Failed {
		t.Fatalf("turn %+v", rec)
	}
	for _, want := range []string{"answered HTTP 404", `"scripted failure 404"`, `Check the model name "m"`} {
		if !strings.Contains(rec.Reason, want) {
			t.Errorf("the reason does not say %q: %s", want, rec.Reason)
		}
	}
	if len(obs.calls) != 1 || obs.calls[0].outcome != ModelCallRejected {
		t.Fatalf("observed calls %+v", obs.calls)
	}
}

// A provider's message is quoted on one line and bounded, whatever it
// holds.
func TestProviderWords(t *testing.T) {
	got := providerWords("line one\nline\x00two " + strings.Repeat("é", 200))
	if strings.ContainsAny(got, "\n\x00") || len(got) > 204 || !strings.HasPrefix(got, "line one line two") || !strings.HasSuffix(got, "é…") {
		t.Fatalf("%q", got)
	}
}
