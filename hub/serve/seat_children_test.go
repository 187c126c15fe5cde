package serve

import (
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// Issue 27, item 2 (FLT-4): a seat's mailbox does not wait on a per-role
// child that failed to start, and the seat's turn is told which of its
// own servers are not running, by name only.
func TestATurnIsToldItsFailedChild(t *testing.T) {
	doc := strings.Replace(company, "    name: Core\n", "    name: Core\n    mcp_env: {ghost: {GHOST_SEAT: \"1\"}}\n", 1) +
		"mcp_servers:\n  - {name: ghost, shared: false, command: /nonexistent/bin/crewlet-ghost}\n"
	var mu sync.Mutex
	var first string
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			mu.Lock()
			if first == "" {
				first = c.UserText()
			}
			mu.Unlock()
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "on it"})
		}
		return finished
	})
	n := startTurnNode(t, model, doc, env)
	ada := n.client(env["ADA_TOKEN"])
	key := call(t, ada, "create_work_item", map[string]any{"title": "Check the ghost"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant is the ghost up?"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("the turn ended %v", end)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(first, "not running now") || !strings.Contains(first, "ghost") || strings.Contains(first, "nonexistent") {
		t.Fatalf("the turn's opening did not name its failed child (and only its name):\n%s", first)
	}
}
