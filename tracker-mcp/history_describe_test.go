package tracker

import (
	"fmt"
	"strings"
	"testing"
)

// OUT-3: a history row is kept forever on every node, so free text past
// 600 bytes — a description, a reassignment's reason, a checklist entry, a
// comment — is described on its row (by size), never quoted: no piece of
// the text is on the row, and the row says how many bytes it was.
func TestHistoryDescribesFreeText(t *testing.T) {
	h := newHarness(t)
	key := h.ok(ada, "create_work_item", map[string]any{"title": "Long texts", "description": "short at first"})["key"].(string)
	long := func(field string) string {
		return strings.Repeat(fmt.Sprintf("%s-words-that-must-not-be-quoted ", field), 25) // 700+ bytes
	}
	for _, c := range []struct {
		field string // the history row's field
		args  map[string]any
		text  string
	}{
		{"description", map[string]any{"description": long("description")}, long("description")},
		{"assignee", map[string]any{"assignee": "grace", "reason": long("reason")}, long("reason")},
		{"checklist", map[string]any{"checklist": map[string]any{"add": long("entry")}}, long("entry")},
		{"thread", nil, long("comment")},
	} {
		t.Run(c.field, func(t *testing.T) {
			if len(c.text) <= 600 {
				t.Fatalf("the text is %d bytes, not past 600", len(c.text))
			}
			if c.args == nil {
				h.ok(ada, "comment_on_work_item", map[string]any{"key": key, "body": c.text})
			} else {
				c.args["key"] = key
				h.ok(ada, "update_work_item", c.args)
			}
			hist := h.ok(ada, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)["history"].([]any)
			row := hist[len(hist)-1].(map[string]any)
			change := row["change"].(string)
			if row["field"] != c.field || strings.Contains(change, "must-not-be-quoted") || len(change) > 200 ||
				!strings.Contains(change, fmt.Sprintf("%d bytes", len(c.text))) {
				t.Fatalf("the %s row: %v, want the text described by its %d bytes", c.field, row, len(c.text))
			}
		})
	}
}
