package agent

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

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

// OUT-3: a provider's message is quoted on one line, whole up to 2 KiB;
// past that it ends on a whole word and says how much it left out.
func TestProviderWords(t *testing.T) {
	got, left := providerWords("line one\nline\x00two " + strings.Repeat("é", 200))
	if strings.ContainsAny(got, "\n\x00") || left != 0 || got != "line one line two "+strings.Repeat("é", 200) {
		t.Fatalf("%q, %d left", got, left)
	}
	long := strings.Repeat("word ", 1000) // 5,000 bytes
	got, left = providerWords(long)
	if len(got) > vendorRefusalBytes || len(got) < vendorRefusalBytes-8 || !strings.HasSuffix(got, "word") || len(got)+left != len(strings.TrimSpace(long)) {
		t.Fatalf("%d bytes quoted ending %q, %d left", len(got), got[max(0, len(got)-10):], left)
	}
	got, left = providerWords(strings.Repeat("é", 2000)) // no spaces: a whole character
	if !utf8.ValidString(got) || len(got) != vendorRefusalBytes || left != 4000-vendorRefusalBytes {
		t.Fatalf("%d bytes quoted, %d left", len(got), left)
	}
}

// OUT-3: a turn that ends on a provider's refusal quotes its message whole
// when it is a paragraph, and marks it, saying how much was left out, when
// it runs past 2 KiB.
func TestModelRefusalQuotedAndMarked(t *testing.T) {
	para := strings.TrimSpace(strings.Repeat("The request was refused by policy. ", 30)) // ~1 KiB
	h := newHarness(t, modeltest.Steps(modeltest.Reply{Status: 400, Message: para}), nil, nil)
	if rec := h.turn(); rec.Outcome != Failed || !strings.Contains(rec.Reason, fmt.Sprintf("%q", para)) || strings.Contains(rec.Reason, "left out") {
		t.Fatalf("a 1 KiB refusal is not quoted whole: %+v", rec)
	}
	long := strings.Repeat("blocked ", 1024) // 8 KiB
	h = newHarness(t, modeltest.Steps(modeltest.Reply{Status: 400, Message: long}), nil, nil)
	rec := h.turn()
	want := fmt.Sprintf("[the provider's message runs %d bytes further, left out here]", len(strings.TrimSpace(long))-(vendorRefusalBytes-1))
	if rec.Outcome != Failed || !strings.Contains(rec.Reason, want) || strings.Count(rec.Reason, "blocked") != vendorRefusalBytes/len("blocked ") {
		t.Fatalf("an 8 KiB refusal, want it cut at %d bytes and marked %q: %d bytes of reason, %d words quoted: %.300s",
			vendorRefusalBytes, want, len(rec.Reason), strings.Count(rec.Reason, "blocked"), rec.Reason)
	}
}
