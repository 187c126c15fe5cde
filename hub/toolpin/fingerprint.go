// Package toolpin pins third-party tool definitions (issue 28): what a
// server says of a tool (its title, description, input and output schema
// and annotations) is fingerprinted, a person approves or rejects a
// fingerprint, and the decision is kept on the node's log, so every node
// of a fleet holds the same approvals and a server that changes what it
// says after a restart or an update is held until a person has seen the
// change.
//
// The package keeps the records and serves the operator tools that read
// and make them (list_tool_changes, decide_tool_change); which tools are
// held, and what a held tool answers, is the hub's (hub/pinning.go), which
// hands the tools what it holds through Deps.
//
// Ownership and concurrency: a Store is a view over a state.Node it does
// not own; every method is safe for concurrent use. Follow runs until its
// context ends, on the caller's goroutine.
package toolpin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// Def is what a tool's approval covers: everything a server says of the
// tool that reaches a model or a client deciding how to call it. Raw JSON
// members are kept as the server wrote them; Fingerprint reads them
// canonically.
type Def struct {
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Fingerprint is a digest of d in canonical JSON: object keys sorted,
// insignificant space dropped, numbers as written. A server that lists the
// same definition with its keys in another order has the same fingerprint;
// a changed word, schema member or hint gives another.
func Fingerprint(d Def) (string, error) {
	canon := struct {
		Title        string `json:"title"`
		Description  string `json:"description"`
		InputSchema  any    `json:"input_schema"`
		OutputSchema any    `json:"output_schema"`
		Annotations  any    `json:"annotations"`
	}{Title: d.Title, Description: d.Description}
	for _, m := range []struct {
		raw json.RawMessage
		to  *any
	}{{d.InputSchema, &canon.InputSchema}, {d.OutputSchema, &canon.OutputSchema}, {d.Annotations, &canon.Annotations}} {
		v, err := decode(m.raw)
		if err != nil {
			return "", err
		}
		*m.to = v
	}
	// encoding/json writes map keys sorted, so a value decoded into maps
	// and written again is canonical.
	b, err := json.Marshal(canon)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// decode reads raw JSON into maps, slices and json.Numbers; null and
// absent read alike, as nothing.
func decode(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("toolpin: a definition member is not JSON: %w", err)
	}
	return v, nil
}

// SchemaChange is one difference between two JSON values, at a path of
// object keys and array indexes ("/properties/path/description").
type SchemaChange struct {
	Path string `json:"path"`
	// Change is added, removed or changed.
	Change string          `json:"change"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new,omitempty"`
}

// Diff lists what differs between two JSON values, in path order: what a
// person reads to see how a schema or the annotations moved. Members are
// compared canonically, so key order makes no difference.
func Diff(old, cur json.RawMessage) ([]SchemaChange, error) {
	a, err := decode(old)
	if err != nil {
		return nil, err
	}
	b, err := decode(cur)
	if err != nil {
		return nil, err
	}
	var out []SchemaChange
	diff("", a, b, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func diff(path string, a, b any, out *[]SchemaChange) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			av, ina := am[k]
			bv, inb := bm[k]
			p := path + "/" + k
			switch {
			case !ina:
				*out = append(*out, SchemaChange{Path: p, Change: "added", New: raw(bv)})
			case !inb:
				*out = append(*out, SchemaChange{Path: p, Change: "removed", Old: raw(av)})
			default:
				diff(p, av, bv, out)
			}
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diff(fmt.Sprintf("%s/%d", path, i), as[i], bs[i], out)
		}
		return
	}
	ra, rb := raw(a), raw(b)
	if bytes.Equal(ra, rb) {
		return
	}
	switch {
	case a == nil:
		*out = append(*out, SchemaChange{Path: orRoot(path), Change: "added", New: rb})
	case b == nil:
		*out = append(*out, SchemaChange{Path: orRoot(path), Change: "removed", Old: ra})
	default:
		*out = append(*out, SchemaChange{Path: orRoot(path), Change: "changed", Old: ra, New: rb})
	}
}

func raw(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	// Written for a person to read: <IMPORTANT> as it was sent, not
	// escaped for HTML.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(b.Bytes(), "\n")
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
