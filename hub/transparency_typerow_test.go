package hub

// The row of testdata/transparency/differences.txt about a 2026-07-28
// result's type (result_type.go): the hub types every tools/call result it
// answers a 2026-07-28 client, as a go-sdk server does, whatever the
// server behind wrote.
func init() {
	transparencyRows["result-type-of-the-hop"] = func(w, h *view, sc *script) bool {
		if !h.modernClient || h.Result == nil {
			return false
		}
		want := "complete"
		if _, asks := h.Result["inputRequests"]; asks {
			want = "input_required"
		}
		got, _ := h.Result["resultType"].(string)
		var direct any
		if w.Result != nil {
			direct = w.Result["resultType"]
		}
		if got != want || direct == got {
			return false
		}
		delete(h.Result, "resultType")
		if w.Result != nil {
			delete(w.Result, "resultType")
		}
		return true
	}
}
