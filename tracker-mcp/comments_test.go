package tracker

import (
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// TRK-4: mentions wake the seats they name; a turn posts once per item even
// when its re-run words the remark differently.
func TestCommentMentionsAndOncePerTurn(t *testing.T) {
	h := newHarness(t)
	key := h.ok(alan, "create_work_item", map[string]any{"title": "Discuss"})["key"].(string)
	out := h.ok(alan, "comment_on_work_item", map[string]any{"key": key, "body": "@grace and @nobody, please look; cc @Linus."})
	if !slices.Equal(toStrings(out["mentions"]), []string{"grace", "linus"}) || num(out["comment_id"]) != 1 {
		t.Fatalf("comment %v", out)
	}
	var woken []string
	rows, err := Wakes(h.node, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rows {
		if w.Subject == key && w.Comment == 1 {
			woken = append(woken, w.Seat)
		}
	}
	if len(rows) > 1 {
		rest, err := Wakes(h.node, rows[0].Cursor, 0)
		if err != nil || len(rest) != len(rows)-1 {
			t.Fatalf("after a cursor: %d rows, %v", len(rest), err)
		}
	}
	if !slices.Equal(woken, []string{"grace", "linus"}) {
		t.Fatalf("woken %v", woken)
	}
	rerun := h.ok(alan, "comment_on_work_item", map[string]any{"key": key, "body": "Grace, please take a look."})
	if rerun["already_posted"] != true || num(rerun["comment_id"]) != 1 {
		t.Fatalf("re-run turn posted again: %v", rerun)
	}
	item := h.ok(alan, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)
	if len(item["thread"].([]any)) != 1 {
		t.Fatalf("thread %v", item["thread"])
	}
	// A question in a comment, answered by choice.
	q := h.ok(turnOf(alan, "t-q"), "comment_on_work_item", map[string]any{"key": key, "body": "Ship Friday?", "ask": "ada", "decision": []string{"yes", "no"}})
	h.ok(ada, "comment_on_work_item", map[string]any{"key": key, "body": "Yes.", "answers": num(q["comment_id"]), "choice": "yes"})
	h.refused(ada, "comment_on_work_item", map[string]any{"key": key, "body": "No.", "answers": num(q["comment_id"]), "choice": "no"}, authority.AlreadyAnswered)
	h.refused(ada, "comment_on_work_item", map[string]any{"key": key, "body": "hm", "ask": "ghost"}, authority.Invalid)

	h.drop(1)
	r := h.refused(turnOf(alan, "t-lost"), "comment_on_work_item", map[string]any{"key": key, "body": "@grace lost?"}, authority.Unavailable)
	for _, k := range []string{"comment_id", "mentions"} {
		if _, ok := r.Data[k]; ok {
			t.Fatalf("unknown comment reports %s", k)
		}
	}
	if strings.Contains(r.Sentence, "comment 4") {
		t.Fatalf("unknown comment names an id: %s", r.Sentence)
	}
}
