package hub

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
)

// The rows of testdata/transparency/differences.txt as FuzzTransparency
// applies them, and what they need of a view.

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
	if v.modernServer {
		v.sortAsked()
	}
	if len(v.Asked) == 0 {
		v.Asked = nil
	}
	if len(v.Got) == 0 {
		v.Got = nil
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
		if !sc.cut || w.Refused != "" {
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
		const says = unreadable
		if w.Err != "" && w.Result == nil && w.RPC == nil {
			w.unread, h.unread = true, true
			return refuse("unreadable-refused", w, h, says)
		}
		// The SDK reads bytes that are not UTF-8 with U+FFFD in their
		// place; the hub may refuse them instead. A 2026-07-28 client
		// is answered the server's first answer, asking for input: one
		// whose requests hold such bytes is refused, so the client is
		// asked nothing and the server gets nothing back.
		failed, text := h.failed()
		if failed && strings.Contains(text, says) && w.modernServer && w.modernClient &&
			slices.ContainsFunc(sc.scriptAsks(), func(n note) bool { return !utf8.Valid(n.params) }) {
			return failsCall("unreadable-refused", w, h, sc, says)
		}
		if failed && strings.Contains(text, says) && !utf8.Valid(sc.body) {
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
		// The same error on both sides is the client's own: a 2026-07-28
		// client that could not answer an input request the hub passed
		// on fails its call as a direct client does.
		if w.RPC == nil || reflect.DeepEqual(w.RPC, h.RPC) {
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
		for _, a := range w.Asked {
			_ = askWalk(a, text)
		}
		return changed
	},
	"upstream-meta-renamed": func(w, h *view, sc *script) bool {
		changed := false
		rename := func(m map[string]any) {
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
		}
		metaMaps(w, rename)
		askMetaMaps(w, rename)
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
