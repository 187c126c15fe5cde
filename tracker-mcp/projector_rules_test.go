package tracker

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

// ruleCase is one case of testdata/projector_rules.json: operations
// written straight to the log, as another node's tools (or an older build
// of them) may have, and what the projector makes of the last.
type ruleCase struct {
	Name   string   `json:"name"`
	Setup  []ruleOp `json:"setup"`
	Repeat *struct {
		Times int    `json:"times"`
		Op    ruleOp `json:"op"`
	} `json:"repeat"`
	Op      ruleOp          `json:"op"`
	Refused authority.Class `json:"refused"`
	Says    string          `json:"says"`
	Result  map[string]any  `json:"result"`
}

type ruleOp struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// The projectors decide, in log order, whatever a tool checked before it
// wrote: every rule of the board holds for an operation no tool screened
// (TRK-1, TRK-5, WR-8). Payload strings "@repeat:N" stand for N bytes.
func TestProjectorRules(t *testing.T) {
	raw, err := os.ReadFile("testdata/projector_rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []ruleCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			h := newHarness(t)
			n := 0
			write := func(op ruleOp) (state.Answer, error) {
				n++
				payload := expandRepeats(t, op.Payload)
				return h.node.Write(context.Background(), state.Op{Tool: "rules_test", Args: json.RawMessage(strconv.Itoa(n)),
					Kind: op.Kind, Payload: payload, Caller: ada})
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

// expandRepeats replaces every string "@repeat:N" in a payload with N
// bytes of text.
func expandRepeats(t *testing.T, payload json.RawMessage) json.RawMessage {
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
