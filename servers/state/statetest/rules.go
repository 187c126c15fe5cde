package statetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// RuleCase is one case of a projector-rules file: operations written
// straight to the log, as another node's tools (or an older build of
// them) may have, and what the projector makes of the last one.
type RuleCase struct {
	Name   string   `json:"name"`
	Setup  []RuleOp `json:"setup"`
	Repeat *struct {
		Times int    `json:"times"`
		Op    RuleOp `json:"op"`
	} `json:"repeat"`
	Op      RuleOp          `json:"op"`
	Refused authority.Class `json:"refused"`
	Says    string          `json:"says"`
	Result  map[string]any  `json:"result"`
}

// RuleOp is one operation of a case. Strings "@repeat:N" in its payload
// stand for N bytes of text.
type RuleOp struct {
	Kind    string            `json:"kind"`
	Payload json.RawMessage   `json:"payload"`
	Caller  *authority.Caller `json:"caller,omitempty"`
}

// Rules runs every case of a projector-rules file (testdata, JSON) on a
// fresh node from open, writing as caller unless an operation names its
// own: the projectors decide, in log order, whatever a tool checked before
// it wrote, so every rule must hold for operations no tool screened.
func Rules(t *testing.T, path string, open func(t *testing.T) *state.Node, caller authority.Caller) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []RuleCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			n := open(t)
			seq := 0
			write := func(op RuleOp) (state.Answer, error) {
				seq++
				by := caller
				if op.Caller != nil {
					by = *op.Caller
				}
				a, err := n.Write(context.Background(), state.Op{Tool: "rules_test", Args: json.RawMessage(strconv.Itoa(seq)),
					Kind: op.Kind, Payload: expand(t, op.Payload), Caller: by})
				return a, err
			}
			for i, op := range tc.Setup {
				if _, err := write(op); err != nil {
					t.Fatalf("setup %d: %v", i, err)
				}
			}
			if tc.Repeat != nil {
				for i := range tc.Repeat.Times {
					if _, err := write(tc.Repeat.Op); err != nil {
						t.Fatalf("repeat %d: %v", i, err)
					}
				}
			}
			a, err := write(tc.Op)
			if tc.Refused != "" {
				r := authority.AsRefusal(err)
				if err == nil || r.Class != tc.Refused || !strings.Contains(r.Sentence, tc.Says) {
					t.Fatalf("answered %+v, %v; want %s saying %q", a, err, tc.Refused, tc.Says)
				}
				if a.Outcome != state.Applied {
					t.Fatalf("a projector's refusal landed as %q, want applied (the operation is decided, as refused)", a.Outcome)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(a.Result, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.Result {
				if fmt.Sprint(got[k]) != fmt.Sprint(want) {
					t.Errorf("result %s = %v, want %v (whole: %v)", k, got[k], want, got)
				}
			}
		})
	}
}

// expand replaces "@repeat:N" strings in a payload.
func expand(t *testing.T, payload json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if n, ok := strings.CutPrefix(x, "@repeat:"); ok {
				size, err := strconv.Atoi(n)
				if err != nil {
					t.Fatal(err)
				}
				return strings.Repeat("w", size)
			}
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	b, err := json.Marshal(walk(v))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
