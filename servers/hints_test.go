package servers

import (
	"encoding/json"
	"testing"
)

// CAT-7: a hint reads the same from either vocabulary, and what it reads is
// the value stated: a boolean true is yes, never no or unknown.
func TestTriDecodesTheStatedValue(t *testing.T) {
	for in, want := range map[string]Tri{
		`"yes"`: Yes, `true`: Yes,
		`"no"`: No, `false`: No,
		`"unknown"`: Unknown, `null`: Unknown,
	} {
		// Start from a value other than the answer, so a decoder that
		// leaves the target alone cannot pass.
		tr := Yes
		if want == Yes {
			tr = No
		}
		if err := json.Unmarshal([]byte(in), &tr); err != nil || tr != want {
			t.Errorf("%s decodes to %v (%v), want %v", in, tr, err, want)
		}
	}
	for _, in := range []Tri{Yes, No, Unknown} {
		b, err := json.Marshal(in)
		back := Tri(99) // no hint: what a decoder that did nothing leaves
		if err != nil || json.Unmarshal(b, &back) != nil || back != in {
			t.Errorf("%v does not survive a round trip: %s became %d", in, b, back)
		}
	}
}

// CAT-9: an override's stated hints win, each one on its own, and the
// hints it leaves unknown keep the base's value, whatever that is.
func TestHintsOverrideEachHint(t *testing.T) {
	all := []Tri{Unknown, Yes, No}
	for _, base := range all {
		for _, over := range all {
			want := base
			if over != Unknown {
				want = over
			}
			got := Hints{ReadOnly: base, Destructive: base, Idempotent: base, OpenWorld: base}.
				Override(Hints{ReadOnly: over, Destructive: over, Idempotent: over, OpenWorld: over})
			if got != (Hints{ReadOnly: want, Destructive: want, Idempotent: want, OpenWorld: want}) {
				t.Errorf("%v over %v = %+v, want all %v", over, base, got, want)
			}
		}
	}
}

// CAT-7: the protocol's annotations state a yes as true and a no as false;
// an unknown destructive or open-world hint is left out, and an unknown
// read-only or idempotent one can only be false.
func TestAnnotationsStateEachHint(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		h                      Hints
		readOnly, idempotent   bool
		destructive, openWorld *bool
	}{
		{Hints{ReadOnly: Yes, Idempotent: Yes, Destructive: Yes, OpenWorld: Yes}, true, true, &yes, &yes},
		{Hints{ReadOnly: No, Idempotent: No, Destructive: No, OpenWorld: No}, false, false, &no, &no},
		{Hints{}, false, false, nil, nil},
	} {
		a := Annotations(tc.h)
		same := func(got, want *bool) bool { return (got == nil) == (want == nil) && (got == nil || *got == *want) }
		if a.ReadOnlyHint != tc.readOnly || a.IdempotentHint != tc.idempotent || !same(a.DestructiveHint, tc.destructive) || !same(a.OpenWorldHint, tc.openWorld) {
			t.Errorf("%+v annotated as %+v", tc.h, a)
		}
	}
}
