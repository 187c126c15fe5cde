package authority

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
)

// REF-2: the registry holds every class of the requirement, once, with a
// meaning and a remedy; turn_quota is the one the artifact store adds
// (ART-8: past a turn's quota the call is refused and told to stop).
func TestRegistryCodesUniqueAndComplete(t *testing.T) {
	want := []string{"invalid", "not_found", "forbidden", "stale_version", "conflict", "exists",
		"already_answered", "reassignment_budget", "inbox_full", "not_running",
		"steer_unsupported", "budget_exhausted", "turn_quota", "unavailable", "internal_error"}
	seen := map[Class]bool{}
	code := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for _, c := range Classes() {
		if seen[c.Class] {
			t.Errorf("class %q registered twice", c.Class)
		}
		seen[c.Class] = true
		if !code.MatchString(string(c.Class)) {
			t.Errorf("class %q is not a snake_case wire code", c.Class)
		}
		if c.Meaning == "" || c.Remedy == "" {
			t.Errorf("class %q lacks meaning or remedy", c.Class)
		}
		// A refusal is the caller's to act on; only the node's own fault
		// reads as a server error outside a tool call.
		if s := HTTPStatus(c.Class); (s >= 500) != (c.Class == InternalError || c.Class == Unavailable) || s < 400 {
			t.Errorf("class %q answers HTTP %d", c.Class, s)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("registry has %d classes, want %d", len(seen), len(want))
	}
	for _, w := range want {
		if _, ok := Lookup(w); !ok {
			t.Errorf("class %q missing from the registry", w)
		}
	}
}

// STYLE: a refusal matches by class through any wrapping, whatever its words.
func TestRefusalMatchesByClassThroughWrapping(t *testing.T) {
	r := Refuse(NotFound, "no colleague called %q", "zed")
	wrapped := fmt.Errorf("lookup: %w", fmt.Errorf("directory: %w", r))
	if !errors.Is(wrapped, ErrNotFound) {
		t.Fatal("wrapped not_found refusal does not match ErrNotFound")
	}
	if errors.Is(wrapped, ErrForbidden) {
		t.Fatal("not_found refusal matched ErrForbidden")
	}
	var got *Refusal
	if !errors.As(wrapped, &got) || got.Sentence != `no colleague called "zed"` {
		t.Fatalf("errors.As gave %+v", got)
	}
}

func TestRefuseUnregisteredClassPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Refuse accepted a class outside the registry")
		}
	}()
	Refuse(Class("made_up"), "x")
}

// REF-4: an unmarked failure is the node's own: fixed sentence, no cause.
func TestAsRefusalUnmarkedIsInternalWithFixedSentence(t *testing.T) {
	cause := errors.New("pebble: corrupt block at /var/lib/secret/path")
	r := AsRefusal(fmt.Errorf("read: %w", cause))
	if r.Class != InternalError || r.Sentence != InternalErrorSentence {
		t.Fatalf("got %+v", r)
	}
	if regexp.MustCompile(`pebble|secret`).MatchString(r.Sentence) {
		t.Fatal("internal_error sentence leaks its cause")
	}
	if AsRefusal(nil) != nil {
		t.Fatal("nil error classed as a refusal")
	}
	u := Refuse(Unavailable, "the store is busy")
	if AsRefusal(fmt.Errorf("x: %w", u)) != u {
		t.Fatal("a marked refusal was not answered as itself")
	}
}

func TestWithDataCopies(t *testing.T) {
	r := Refuse(Invalid, "ambiguous")
	r2 := r.WithData("candidates", []string{"a", "b"})
	if r.Data != nil || r2.Data["candidates"] == nil {
		t.Fatalf("WithData mutated or lost data: %+v %+v", r, r2)
	}
}
