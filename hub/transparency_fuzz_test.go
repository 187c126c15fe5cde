package hub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Issue 25, item 2 (OUT-1, REF-1, REF-6): the hub forwards a third-party
// server's answer to tools/call transparently. Each input becomes an
// answer (deriveScript): arbitrary JSON as structured content and _meta,
// content of every type, text holding JSON and event-stream look-alikes
// and the token "method", JSON-RPC members at every depth, invalid UTF-8,
// deep nesting, long texts, JSON-RPC errors, plain JSON or an event stream
// with log lines and progress before the answer. Four scripted servers give
// it, over streamable HTTP and over stdio, and on each transport one the
// hub links to on a session revision and one on 2026-07-28; each is called directly by a
// go-sdk client and through the hub by go-sdk clients of both revisions,
// on the hub's fast path and on the SDK's. What
// the clients read must be equal once the documented differences, each a
// row of testdata/transparency/differences.txt, are applied, and nothing
// else.
func FuzzTransparency(f *testing.F) {
	rows := readDifferences(f)
	seeds := transparencySeeds(f)
	for i, s := range seeds {
		if slowKinds[seedKinds[i].name] && fuzzing() {
			// Go's fuzzing worker gives an input 10 s: an exploration
			// starts from the seeds that fit, a replay takes them all.
			continue
		}
		f.Add(s)
	}
	rig := newTransparencyRig(f)
	used := map[string]int{}
	var runs int
	f.Cleanup(func() {
		// A plain run replays every seed and the whole corpus: each row
		// must have been needed by some input, or it allows a difference
		// no input shows.
		if fuzzing() || runs < len(seeds)+corpusSize(f) {
			return
		}
		for _, r := range rows {
			if used[r.name] == 0 {
				f.Errorf("no input needed the row %q of %s: a documented difference nobody shows", r.name, differencesFile)
			}
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		runs++
		sc := deriveScript(data)
		shown := 0
		for _, s := range rig.servers {
			sc := sc
			if sc.cut && s.stdio {
				on := *sc
				on.stdio = true
				sc = &on
			}
			streamed := s.streamed(sc)
			direct := s.direct.call(t, s.scripts, s.tool, sc, streamed, false)
			want := viewOf(direct, sc)
			for _, c := range rig.viaHub {
				for _, fast := range []bool{true, false} {
					rig.hub.operator.noFast.Store(!fast)
					since := time.Now()
					got := viewOf(c.call(t, s.scripts, s.tool, sc, streamed, true), nil)
					rig.linksUp(t, s, sc, since, c.revision, fast)
					w, h := want.clone(), got.clone()
					for _, r := range rows {
						if transparencyRows[r.name](w, h, sc) {
							used[r.name]++
						}
					}
					w.settle()
					h.settle()
					if !reflect.DeepEqual(w, h) {
						if shown++; shown == 1 {
							t.Errorf("answer %s", clipTo(string(sc.body), 600))
						}
						t.Errorf("%s, a %s client through the hub (fast=%v) read otherwise than a client of the server:\ndirect %s\nhub    %s\nnormalised direct %s\nnormalised hub    %s",
							s.tool, c.revision, fast, clipTo(want.String(), 700), clipTo(got.String(), 700),
							clipTo(w.String(), 700), clipTo(h.String(), 700))
					}
				}
			}
		}
		rig.hub.operator.noFast.Store(false)
	})
}

const differencesFile = "testdata/transparency/differences.txt"

// fuzzing reports a run with -fuzz, which explores rather than replays.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

func corpusSize(tb testing.TB) int {
	entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzTransparency"))
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	return len(entries)
}

// difference is a row of the table.
type difference struct{ name, allows, why string }

// readDifferences reads the table and checks it against transparencyRows:
// a row with no implementation, or an implementation with no row, fails.
func readDifferences(tb testing.TB) []difference {
	tb.Helper()
	raw, err := os.ReadFile(differencesFile)
	if err != nil {
		tb.Fatal(err)
	}
	var rows []difference
	var cur *difference
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		field, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch {
		case !ok || value == "":
			tb.Fatalf("%s:%d: not a field of a row: %q", differencesFile, n, line)
		case field == "name":
			rows = append(rows, difference{name: value})
			cur = &rows[len(rows)-1]
		case cur == nil:
			tb.Fatalf("%s:%d: %s before any name", differencesFile, n, field)
		case field == "allows" && cur.allows == "":
			cur.allows = value
		case field == "why" && cur.why == "":
			cur.why = value
		default:
			tb.Fatalf("%s:%d: unexpected field %q in row %q", differencesFile, n, field, cur.name)
		}
	}
	seen := map[string]bool{}
	for _, r := range rows {
		switch {
		case r.allows == "" || r.why == "":
			tb.Errorf("%s: row %q must say what it allows and why", differencesFile, r.name)
		case seen[r.name]:
			tb.Errorf("%s: row %q twice", differencesFile, r.name)
		case transparencyRows[r.name] == nil:
			tb.Errorf("%s: row %q has no implementation in transparencyRows", differencesFile, r.name)
		}
		seen[r.name] = true
	}
	for name := range transparencyRows {
		if !seen[name] {
			tb.Errorf("transparencyRows implements %q, which %s does not document", name, differencesFile)
		}
	}
	if len(rows) == 0 {
		tb.Errorf("%s has no rows", differencesFile)
	}
	return rows
}

// view is what a client read of one call, as JSON values: a result, a
// JSON-RPC error, or a failure to read the answer at all; and the
// notifications that came while it ran.
type view struct {
	Result  map[string]any   `json:"result,omitempty"`
	RPC     map[string]any   `json:"rpcError,omitempty"`
	Err     string           `json:"error,omitempty"`
	Refused string           `json:"refused,omitempty"` // a row's name, where one turned the answer into a refusal
	Notes   []map[string]any `json:"notes,omitempty"`
	// Unreadable marks, for a direct call, each of Notes whose bytes
	// were not UTF-8 (the SDK read them with U+FFFD in their place).
	Unreadable []bool `json:"unreadable,omitempty"`
	// unread is set, on both sides, by the row that finds the direct
	// client could not read the answer at all, for the row that allows
	// for the notes lost with it.
	unread bool
}

// viewOf is what the client read; sc, for a direct call, is what the
// server wrote.
func viewOf(o outcome, sc *script) *view {
	v := &view{Notes: o.notes}
	// The direct client got every note the server wrote, and the end of
	// the notes after them when the answer was streamed.
	if sc != nil && (len(o.notes) == len(sc.notes) || len(o.notes) == len(sc.notes)+1) {
		for i, n := range sc.notes {
			if utf8.Valid(n.params) {
				continue
			}
			if v.Unreadable == nil {
				v.Unreadable = make([]bool, len(o.notes))
			}
			v.Unreadable[i] = true
		}
	}
	var wire *jsonrpc.Error
	switch {
	case errors.As(o.err, &wire):
		v.RPC = map[string]any{"code": json.Number(fmt.Sprint(wire.Code)), "message": wire.Message}
		if len(wire.Data) > 0 {
			v.RPC["data"] = canonical(wire.Data)
		}
	case o.err != nil:
		v.Err = o.err.Error()
	default:
		b, err := json.Marshal(o.res)
		if err != nil {
			v.Err = "the result could not be written again: " + err.Error()
			break
		}
		v.Result, _ = canonical(b).(map[string]any)
	}
	return v
}

func (v *view) clone() *view {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out := &view{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		panic(err)
	}
	return out
}

func (v *view) String() string {
	b, _ := json.Marshal(v)
	return string(b)
}

// canonical decodes JSON keeping numbers as written.
func canonical(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "undecodable: " + err.Error()
	}
	return v
}

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

// failed reports a failed result and its first text.
func (v *view) failed() (bool, string) {
	if v.Result == nil || v.Result["isError"] != true {
		return false, ""
	}
	content, _ := v.Result["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			s, _ := m["text"].(string)
			return true, s
		}
	}
	return true, ""
}

// refuse makes both sides the row's refusal, when the hub's answer is a
// failed result saying what the row says (says, a part of its sentence).
func refuse(row string, w, h *view, says string) bool {
	failed, text := h.failed()
	if failed && strings.Contains(text, says) {
		h.Result, h.RPC, h.Err, h.Refused = nil, nil, "", row
	}
	w.Result, w.RPC, w.Err, w.Refused = nil, nil, "", row
	return true
}

// clean holds the secrets the rig's hub redacts: its ${VAR} value and its
// operator tokens.
var clean = sync.OnceValue(func() *sanitize.Sanitizer {
	return sanitize.New(transparencySecret, adaTok, "ci-token-123456")
})

// textWalk visits every text of a result the redaction row covers, keys
// included, giving each to fn, which answers the text to keep or an error.
// It answers the first error.
func textWalk(result map[string]any, fn func(string) (string, error)) error {
	var walk func(v any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			return fn(x)
		case []any:
			for i, e := range x {
				n, err := walk(e)
				if err != nil {
					return nil, err
				}
				x[i] = n
			}
			return x, nil
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				nk, err := fn(k)
				if err != nil {
					return nil, err
				}
				n, err := walk(e)
				if err != nil {
					return nil, err
				}
				if _, dup := out[nk]; dup {
					return nil, errCollision
				}
				out[nk] = n
			}
			return out, nil
		}
		return v, nil
	}
	for k, v := range result {
		switch k {
		case "content":
			items, _ := v.([]any)
			for _, it := range items {
				item, _ := it.(map[string]any)
				for field, fv := range item {
					if field == "type" || field == "data" || field == "annotations" {
						continue
					}
					if field == "resource" {
						res, _ := fv.(map[string]any)
						for rf, rv := range res {
							if rf == "blob" {
								continue
							}
							n, err := walk(rv)
							if err != nil {
								return err
							}
							res[rf] = n
						}
						continue
					}
					n, err := walk(fv)
					if err != nil {
						return err
					}
					item[field] = n
				}
			}
		case "isError":
		default:
			n, err := walk(v)
			if err != nil {
				return err
			}
			result[k] = n
		}
	}
	return nil
}

var errCollision = errors.New("two keys collide")

// noteWalk is textWalk over a notification's params, whose progress token
// is the client's own.
func noteWalk(n map[string]any, fn func(string) (string, error)) error {
	params, _ := n["params"].(map[string]any)
	token, had := params["progressToken"]
	err := textWalk(params, fn)
	if had {
		params["progressToken"] = token
	}
	return err
}

func isBinary(s string) (string, error) {
	if _, err := clean().Text(s); errors.Is(err, sanitize.ErrBinary) {
		return "", err
	}
	return s, nil
}

func (v *view) unreadableNote(i int) bool { return i < len(v.Unreadable) && v.Unreadable[i] }

// settle writes no notes one way, as the rows leave them one way or the
// other.
func (v *view) settle() {
	if len(v.Notes) == 0 {
		v.Notes = nil
	}
	if len(v.Unreadable) == 0 {
		v.Unreadable = nil
	}
}

// dropNotes drops the notes drop says, keeping Unreadable in step.
func (v *view) dropNotes(drop func(i int, n map[string]any) bool) bool {
	var notes []map[string]any
	var unreadable []bool
	for i, n := range v.Notes {
		if drop(i, n) {
			continue
		}
		notes = append(notes, n)
		if v.Unreadable != nil {
			unreadable = append(unreadable, v.unreadableNote(i))
		}
	}
	changed := len(notes) != len(v.Notes)
	v.Notes, v.Unreadable = notes, unreadable
	return changed
}

// metaMaps visits every _meta object of a result or notification.
func metaMaps(v *view, fn func(m map[string]any)) {
	visit := func(parent map[string]any) {
		if m, ok := parent["_meta"].(map[string]any); ok {
			fn(m)
		}
	}
	if v.Result != nil {
		visit(v.Result)
		items, _ := v.Result["content"].([]any)
		for _, it := range items {
			item, _ := it.(map[string]any)
			visit(item)
			if res, ok := item["resource"].(map[string]any); ok {
				visit(res)
			}
		}
	}
	for _, n := range v.Notes {
		if params, ok := n["params"].(map[string]any); ok {
			visit(params)
		}
	}
}

// transparencyRows implements each row of the table: given the direct
// view and the hub's, it applies the allowed difference and reports
// whether it changed anything.
var transparencyRows = map[string]func(w, h *view, sc *script) bool{
	"stream-broken-refused": func(w, h *view, sc *script) bool {
		if !sc.cut {
			return false
		}
		// A stdio server's process ended with its answer; an HTTP
		// server's answer broke on the call's own connection, its
		// session fine.
		says := "was cut off on its way back"
		if sc.stdio {
			says = "is not running"
		}
		if failed, text := h.failed(); failed && strings.Contains(text, says) {
			refusal, _ := h.Result["structuredContent"].(map[string]any)
			data, _ := refusal["data"].(map[string]any)
			if refusal["class"] == "unavailable" && data["may_have_taken_effect"] == true {
				h.Result, h.RPC, h.Err, h.Refused = nil, nil, "", "stream-broken-refused"
			}
		}
		w.Result, w.RPC, w.Err, w.Refused = nil, nil, "", "stream-broken-refused"
		return true
	},
	"unreadable-refused": func(w, h *view, sc *script) bool {
		const says = "answered the call with something the hub could not read"
		if w.Err != "" && w.Result == nil && w.RPC == nil {
			w.unread, h.unread = true, true
			return refuse("unreadable-refused", w, h, says)
		}
		// The SDK reads bytes that are not UTF-8 with U+FFFD in their
		// place; the hub may refuse them instead.
		if failed, text := h.failed(); failed && strings.Contains(text, says) && !utf8.Valid(sc.body) {
			return refuse("unreadable-refused", w, h, says)
		}
		return false
	},
	"answer-past-bound-refused": func(w, h *view, sc *script) bool {
		// The body alone past the bound puts the message past it.
		if w.Refused != "" || len(sc.body) <= boundMessage {
			return false
		}
		return refuse("answer-past-bound-refused", w, h,
			"answered the call with something the hub could not read (a message larger than the 16 MiB the hub takes)")
	},
	"rpc-error-as-result": func(w, h *view, sc *script) bool {
		if w.RPC == nil {
			return false
		}
		w.Result = map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": w.RPC["message"]}}}
		w.RPC = nil
		return true
	},
	"binary-refused": func(w, h *view, sc *script) bool {
		changed := w.dropNotes(func(_ int, n map[string]any) bool { return noteWalk(n, isBinary) != nil })
		if w.Result != nil && textWalk(w.Result, isBinary) != nil {
			return refuse("binary-refused", w, h, "binary data")
		}
		return changed
	},
	"collision-refused": func(w, h *view, sc *script) bool {
		text := func(s string) (string, error) { return clean().Text(s) }
		if w.Result != nil && errors.Is(textWalk(w.clone().Result, text), errCollision) {
			return refuse("collision-refused", w, h, "the same once control characters and secrets are removed")
		}
		return false
	},
	"redaction": func(w, h *view, sc *script) bool {
		changed := false
		text := func(s string) (string, error) {
			out, err := clean().Text(s)
			changed = changed || out != s
			return out, err
		}
		if w.Result != nil {
			_ = textWalk(w.Result, text)
		}
		for _, n := range w.Notes {
			_ = noteWalk(n, text)
		}
		return changed
	},
	"upstream-meta-renamed": func(w, h *view, sc *script) bool {
		changed := false
		metaMaps(w, func(m map[string]any) {
			moved := map[string]any{}
			for k, v := range m {
				if nk := sanitize.ForeignMetaKey(k); nk != k {
					moved[nk] = v
					delete(m, k)
				}
			}
			for k, v := range moved {
				m[k] = v
				changed = true
			}
		})
		return changed
	},
	"unreadable-note-dropped": func(w, h *view, sc *script) bool {
		changed := false
		for i := len(w.Notes) - 1; i >= 0; i-- {
			if !w.unreadableNote(i) {
				continue
			}
			// The hub passes it as the SDK read it, or drops it.
			if j := slices.IndexFunc(h.Notes, func(n map[string]any) bool { return reflect.DeepEqual(n, w.Notes[i]) }); j >= 0 {
				h.Notes = slices.Delete(h.Notes, j, j+1)
			}
			w.dropNotes(func(k int, _ map[string]any) bool { return k == i })
			changed = true
		}
		w.Unreadable = nil
		return changed
	},
	"unread-answer-notes": func(w, h *view, sc *script) bool {
		if !w.unread {
			return false
		}
		w.unread, h.unread = false, false
		n := min(len(w.Notes), len(h.Notes))
		changed := n != len(w.Notes) || n != len(h.Notes)
		w.Notes, h.Notes = w.Notes[:n], h.Notes[:n]
		if len(w.Unreadable) > n {
			w.Unreadable = w.Unreadable[:n]
		}
		return changed
	},
	"hop-meta": func(w, h *view, sc *script) bool {
		changed := false
		for _, v := range []*view{w, h} {
			if v.Result == nil {
				continue
			}
			m, ok := v.Result["_meta"].(map[string]any)
			if !ok {
				continue
			}
			for k := range m {
				if strings.HasPrefix(k, "io.modelcontextprotocol/") {
					delete(m, k)
					changed = true
				}
			}
			if len(m) == 0 {
				delete(v.Result, "_meta")
			}
		}
		return changed
	},
	"failure-marked": func(w, h *view, sc *script) bool {
		if failed, _ := w.failed(); !failed || h.Result == nil {
			return false
		}
		m, _ := h.Result["_meta"].(map[string]any)
		if m[servers.MetaRefusal] != "internal_error" {
			return false
		}
		delete(m, servers.MetaRefusal)
		if len(m) == 0 {
			delete(h.Result, "_meta")
		}
		return true
	},
}
