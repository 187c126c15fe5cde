package hub

import (
	"errors"
	"slices"
	"strings"
)

// The rows of testdata/transparency/differences.txt about a server's
// requests of the client (transparency_requests_test.go): the hub's
// client was not asked, or asked otherwise, and the server got the hub's
// answer instead of the client's.

// refusedToModern is the SDK's refusal (refuseRequest) of a request of the
// client while a 2026-07-28 request is served.
const refusedToModern = "was not put to the client: it speaks MCP 2026-07-28"

// unmet is the hub's failed result for a call whose server's input
// requests could not be answered.
const unmet = "before it would finish the call, and none could be given"

// unreadable is the hub's refusal of an answer it could not read.
const unreadable = "answered the call with something the hub could not read"

// marked is what a row leaves of a got answer both sides have as it
// allows.
func gotMarked(row string) any { return map[string]any{"refused": row} }

// roundOne keeps, of the direct client's notes, those a 2026-07-28
// server wrote with its first answer: a call the hub failed there never
// made the call the others go with.
func roundOne(w *view, sc *script) {
	k := min(sc.firstAsk(), len(w.Notes))
	w.Notes = w.Notes[:k]
	if len(w.Unreadable) > k {
		w.Unreadable = w.Unreadable[:k]
	}
}

// failsCall makes both sides the row's refusal of a 2026-07-28 server's
// call whose input requests the hub could not have answered: what the
// clients were asked is in no order of theirs, and the server got nothing.
func failsCall(row string, w, h *view, sc *script, says string) bool {
	roundOne(w, sc)
	w.Asked, h.Asked, w.Got = nil, nil, nil
	return refuse(row, w, h, says)
}

func init() {
	rows := map[string]func(w, h *view, sc *script) bool{
		"input-unmet-refused": func(w, h *view, sc *script) bool {
			// The direct client could not answer an input request, so
			// its call failed; the hub's failed with a result.
			if _, text := h.failed(); !w.modernServer || sc.asks() == 0 || w.Result != nil || !strings.Contains(text, unmet) {
				return false
			}
			return failsCall("input-unmet-refused", w, h, sc, unmet)
		},
		"requests-refused-to-modern-clients": func(w, h *view, sc *script) bool {
			// A 2026-07-28 server's input requests reach a 2026-07-28
			// client in the answer (input_rounds.go): only a session
			// revision's requests in the middle of a call are refused.
			if !w.modernClient || w.modernServer || sc.asks() == 0 || w.Refused != "" {
				return false
			}
			w.Asked = nil
			for j := range min(len(w.Got), len(h.Got)) {
				if strings.Contains(gotError(h.Got[j]), refusedToModern) {
					w.Got[j], h.Got[j] = gotMarked("requests-refused-to-modern-clients"), gotMarked("requests-refused-to-modern-clients")
				}
			}
			return true
		},
		"unsafe-request-refused": func(w, h *view, sc *script) bool {
			asks := sc.scriptAsks()
			if !slices.ContainsFunc(asks, unsafeAsk) {
				return false
			}
			if w.modernServer {
				// A client on a session revision: the hub's call fails at
				// the request it cannot put. A client on 2026-07-28: the
				// answer holding the requests is refused whole, as a
				// result holding such text is.
				says := unmet
				_, text := h.failed()
				if w.modernClient {
					says = unsafeWords(text)
				}
				if w.Refused != "" || says == "" || !strings.Contains(text, says) {
					return false
				}
				return failsCall("unsafe-request-refused", w, h, sc, says)
			}
			text := func(s string) (string, error) { return clean().Text(s) }
			for i := len(w.Asked) - 1; i >= 0; i-- {
				a := w.Asked[i]
				if askWalk(cloneAsk(a), isBinary) != nil || errors.Is(askWalk(cloneAsk(a), text), errCollision) {
					w.dropAsked(i)
				}
			}
			for j := range min(len(w.Got), len(h.Got), len(asks)) {
				if e := gotError(h.Got[j]); unsafeAsk(asks[j]) && (strings.Contains(e, "binary data") ||
					strings.Contains(e, "the same once control characters and secrets are removed")) {
					w.Got[j], h.Got[j] = gotMarked("unsafe-request-refused"), gotMarked("unsafe-request-refused")
				}
			}
			return true
		},
		"request-undecodable-words": func(w, h *view, sc *script) bool {
			changed := false
			for j := range min(len(w.Got), len(h.Got)) {
				we, _ := w.Got[j].(map[string]any)["error"].(map[string]any)
				he, _ := h.Got[j].(map[string]any)["error"].(map[string]any)
				if we == nil || he == nil || we["code"] != he["code"] || we["message"] == he["message"] {
					continue
				}
				if code, _ := we["code"].(interface{ String() string }); code == nil || code.String() != "-32602" {
					continue
				}
				delete(we, "message")
				delete(he, "message")
				changed = true
			}
			return changed
		},
		"roots-params-written": func(w, h *view, sc *script) bool {
			changed := false
			for i, a := range w.Asked {
				if i >= len(h.Asked) || h.Asked[i]["method"] != "roots/list" {
					continue
				}
				if p, ok := h.Asked[i]["params"].(map[string]any); ok && len(p) == 0 && a["method"] == "roots/list" && a["params"] == nil {
					a["params"] = map[string]any{}
					changed = true
				}
			}
			return changed
		},
		"elicit-mode-inferred": func(w, h *view, sc *script) bool {
			changed := false
			for _, a := range w.Asked {
				params, _ := a["params"].(map[string]any)
				if a["method"] != "elicitation/create" || params == nil || params["mode"] != "" {
					continue
				}
				params["mode"] = "form"
				if params["url"] != nil || params["elicitationId"] != nil {
					params["mode"] = "url"
				}
				changed = true
			}
			return changed
		},
	}
	for name, row := range rows {
		transparencyRows[name] = row
	}
}

// unsafeWords is the part of the hub's refusal of an answer asking for
// input whose requests hold binary text or colliding keys that says so;
// "" for another refusal.
func unsafeWords(text string) string {
	for _, says := range []string{"binary data", "the same once control characters and secrets are removed"} {
		if strings.Contains(text, says) {
			return says
		}
	}
	return ""
}

// unsafeAsk reports a request of the script whose params hold binary text
// or keys that collide once clean.
func unsafeAsk(n note) bool {
	if paramsHold(n) {
		return true
	}
	a := map[string]any{"params": canonical(n.params)}
	return errors.Is(askWalk(a, func(s string) (string, error) { return clean().Text(s) }), errCollision)
}

// cloneAsk is a deep copy of an asked request, for a walk that changes
// what it visits.
func cloneAsk(a map[string]any) map[string]any {
	v := &view{Asked: []map[string]any{a}}
	return v.clone().Asked[0]
}
