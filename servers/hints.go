package servers

import (
	"encoding/json"
	"fmt"
)

// Tri is a three-valued hint. Unknown is a first-class answer meaning the
// tool's author said nothing; it is never read as a soft "no" (CAT-7), so an
// unannotated tool is neither a known read nor exempt from the delivery fence.
type Tri uint8

const (
	Unknown Tri = iota
	Yes
	No
)

func (t Tri) String() string {
	switch t {
	case Yes:
		return "yes"
	case No:
		return "no"
	default:
		return "unknown"
	}
}

// Of turns a boolean the author did state into a hint.
func Of(b bool) Tri {
	if b {
		return Yes
	}
	return No
}

// MarshalJSON writes yes, no or unknown.
func (t Tri) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads yes/no/unknown, and also a JSON boolean or null so a
// hint can be read from either vocabulary.
func (t *Tri) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"yes"`, "true":
		*t = Yes
	case `"no"`, "false":
		*t = No
	case `"unknown"`, "null":
		*t = Unknown
	default:
		return fmt.Errorf("hint must be yes, no or unknown, got %s", b)
	}
	return nil
}

// Hints are the four behavioural hints of a tool.
type Hints struct {
	ReadOnly    Tri `json:"read_only"`
	Destructive Tri `json:"destructive"`
	Idempotent  Tri `json:"idempotent"`
	OpenWorld   Tri `json:"open_world"`
}

// HintsFromAnnotations reads the protocol's annotations object from its raw
// JSON. It must be the raw JSON: decoding into the SDK's ToolAnnotations first
// turns an absent readOnlyHint or idempotentHint into false, erasing the
// difference between "the author said no" and "the author said nothing".
// Absent keys, null and non-boolean values are unknown.
func HintsFromAnnotations(raw json.RawMessage) Hints {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return Hints{}
	}
	read := func(key string) Tri {
		switch string(m[key]) {
		case "true":
			return Yes
		case "false":
			return No
		}
		return Unknown
	}
	return Hints{
		ReadOnly:    read("readOnlyHint"),
		Destructive: read("destructiveHint"),
		Idempotent:  read("idempotentHint"),
		OpenWorld:   read("openWorldHint"),
	}
}

// Override lays stated hints over these: every hint o knows wins, and every
// hint o leaves unknown keeps its value. An operator's tool_annotations win
// over what a server advertised (CAT-9).
func (h Hints) Override(o Hints) Hints {
	pick := func(base, over Tri) Tri {
		if over != Unknown {
			return over
		}
		return base
	}
	return Hints{
		ReadOnly:    pick(h.ReadOnly, o.ReadOnly),
		Destructive: pick(h.Destructive, o.Destructive),
		Idempotent:  pick(h.Idempotent, o.Idempotent),
		OpenWorld:   pick(h.OpenWorld, o.OpenWorld),
	}
}
