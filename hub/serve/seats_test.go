package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deskVar makes the test binary a per-role MCP server over stdio: its one
// tool, whoami, answers the identity its seat's mcp_env gave it, and it
// writes its pid where PIDFILE says.
const deskVar = "CREWLET_SERVE_TEST_DESK"

func serveDesk() {
	if f := os.Getenv("PIDFILE"); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "desk", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{Name: "whoami", Description: "Say whose desk this is.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "this desk belongs to " + os.Getenv("WHO")}}}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

func pidOf(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// CFG-6, CAT-11, BLT-3: two seats with children of one template. Each
// turn sees its own seat's child, tools and identity and never the
// other's: the model of alice's turn is told it is alice, its whoami
// answers alice, and nothing of bob reaches it, and the other way round.
// Releasing a seat stops its child, before Release returns; a wake for it
// meanwhile waits, and claiming it starts a new child and then runs it.
func TestTwoSeatsOneTemplate(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pids := t.TempDir()
	doc := strings.Replace(company, `      - {name: Assistant, handle: assistant, instructions: "Answer on the item you were asked on."}`,
		fmt.Sprintf(`      - {name: Alice, handle: alice, mcp_env: {desk: {WHO: alice, PIDFILE: %q}}}
      - {name: Robert, handle: robert, mcp_env: {desk: {WHO: robert, PIDFILE: %q}}}`,
			filepath.Join(pids, "alice"), filepath.Join(pids, "robert")), 1) +
		fmt.Sprintf("mcp_servers:\n  - {name: desk, shared: false, command: %q, env: {%s: \"1\"}, trust: auto}\n", exe, deskVar)
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		switch c.Round() {
		case 0:
			return reply("whoami", nil)
		case 1:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": c.LastResults()[0].Text})
		}
		return finished
	})
	n := startTurnNode(t, model, doc, env)
	// Claimed as the node started, before anything woke them: each seat's
	// child is already running.
	first := pidOf(t, filepath.Join(pids, "alice"))
	if !alive(first) || !alive(pidOf(t, filepath.Join(pids, "robert"))) {
		t.Fatal("a claimed seat's child is not running")
	}
	ada := n.client(env["ADA_TOKEN"])
	key := call(t, ada, "create_work_item", map[string]any{"title": "Whose desk?"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@alice @robert whose desk is this?"})
	for _, seat := range []string{"alice", "robert"} {
		if end := n.turnEnded(seat, key); end["outcome"] != "delivered" {
			t.Fatalf("%s: %v", seat, end)
		}
	}
	for _, c := range model.Requests() {
		me, other := "alice", "robert"
		if strings.Contains(c.System, "You are @robert") {
			me, other = other, me
		}
		if !strings.Contains(c.System, "You are @"+me) || strings.Contains(c.System, other) || !c.Offers("whoami") {
			t.Fatalf("a turn of %s: %s offered %v", me, c.System, c.Tools)
		}
		// The other seat's child would show as a second whoami.
		desks := 0
		for _, tool := range c.Tools {
			if strings.HasPrefix(tool, "whoami") {
				desks++
			}
		}
		if desks != 1 {
			t.Fatalf("a turn of %s was offered %d desks: %v", me, desks, c.Tools)
		}
		for _, r := range c.Results() {
			if strings.Contains(r.Text, other) {
				t.Fatalf("%s's turn saw %s: %s", me, other, r.Text)
			}
		}
		if c.Round() == 1 && c.LastResults()[0].Text != "this desk belongs to "+me {
			t.Fatalf("%s's whoami: %s", me, c.LastResults()[0].Text)
		}
	}
	thread := call(t, ada, "get_work_item", map[string]any{"key": key})["item"].(map[string]any)["thread"].([]any)
	for _, c := range thread[1:] {
		c := c.(map[string]any)
		if !strings.Contains(c["body"].(string), "this desk belongs to "+c["by"].(string)) {
			t.Fatalf("a comment by %v: %v", c["by"], c["body"])
		}
	}

	if err := n.rt.Release(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if alive(first) {
		t.Fatal("alice's child still runs after her seat was released")
	}
	if !alive(pidOf(t, filepath.Join(pids, "robert"))) {
		t.Fatal("releasing alice stopped robert's child")
	}
	later := call(t, ada, "create_work_item", map[string]any{"title": "While away"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": later, "body": "@alice are you there?"})
	if err := n.rt.Claim(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	second := pidOf(t, filepath.Join(pids, "alice"))
	if second == first || !alive(second) {
		t.Fatalf("claiming alice: child %d (was %d)", second, first)
	}
	if end := n.turnEnded("alice", later); end["outcome"] != "delivered" {
		t.Fatalf("the wake that came while alice was away: %v", end)
	}
}
