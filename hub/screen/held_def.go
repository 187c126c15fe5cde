package screen

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/crewlet/hub/servers"
)

// What an approval covers beyond the description (issue 40): the title,
// the hints and what the tool takes. The review card shows each, read
// from the definition the server lists now, so a person approving
// delete_entities sees that it is destructive and what it asks for
// without reading JSON.

// heldDef is the proposed definition as the card draws it.
type heldDef struct {
	Hints  servers.Hints
	Assert Assertion
	// Args are the input schema's top-level arguments, by name.
	Args []argument
	// ArgsUnread says the input schema is not an object schema the card
	// can summarise; the raw schema is shown instead.
	ArgsUnread bool
}

// argument is one top-level property of an input schema.
type argument struct {
	Name, Type string
	Required   bool
}

func readDef(annotations, inputSchema json.RawMessage) heldDef {
	h := servers.HintsFromAnnotations(annotations)
	d := heldDef{Hints: h, Assert: Asserts(h)}
	d.Args, d.ArgsUnread = arguments(inputSchema)
	return d
}

// arguments summarises an input schema: each top-level property with its
// type and whether it is required. A schema that is absent takes
// nothing; one that is not an object with properties is unread.
func arguments(schema json.RawMessage) ([]argument, bool) {
	if len(schema) == 0 {
		return nil, false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, true
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	out := make([]argument, 0, len(s.Properties))
	for name, p := range s.Properties {
		out = append(out, argument{Name: name, Type: typeOf(p), Required: req[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, false
}

// typeOf names a property's type as a person reads it: its type or types,
// an array's items, an enum's values; "any" when the schema says none.
func typeOf(p json.RawMessage) string {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		Items json.RawMessage   `json:"items"`
		Enum  []json.RawMessage `json:"enum"`
	}
	if json.Unmarshal(p, &s) != nil {
		return "any"
	}
	var t string
	var ts []string
	switch {
	case json.Unmarshal(s.Type, &t) == nil:
	case json.Unmarshal(s.Type, &ts) == nil:
		t = strings.Join(ts, " or ")
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = string(v)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	switch {
	case t == "array" && len(s.Items) > 0:
		return "array of " + typeOf(s.Items)
	case t == "":
		return "any"
	}
	return t
}
