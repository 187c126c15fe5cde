package tracker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var writeTools = []string{"create_work_item", "update_work_item", "comment_on_work_item", "merge_work_item",
	"move_work_item", "write_project", "write_work_catalogue", "write_project_file", "remove_project_file"}

// FuzzWriteToolArguments sends whatever a stranger might as the arguments
// of the tracker's write tools. Every answer is a success or a refusal in
// a registered class that is the caller's (invalid, not_found, ...) —
// never internal_error, never a protocol error — and the board still reads
// afterwards.
func FuzzWriteToolArguments(f *testing.F) {
	for i, args := range []string{
		`{"title":"A thing"}`,
		`{"key":"CORE-1","status":"done","if_match":1,"labels":["x"],"add_links":[{"kind":"blocks","key":"CORE-2"}]}`,
		`{"key":"CORE-1","body":"@alan look","ask":"alan","decision":["a","b"]}`,
		`{"key":"CORE-1","into":"CORE-2"}`,
		`{"key":"CORE-1","project":"OPS"}`,
		`{"project":"CORE","labels":["bug"],"default_assignee":"alan"}`,
		`{"statuses":[{"key":"todo","name":"To do","category":"open"},{"key":"done","name":"Done","category":"done"}],"priorities":["low"]}`,
		`{"path":"a/b.md","content":"text","if_version":0}`,
		`{"path":"a/b.md"}`,
	} {
		f.Add(uint8(i), []byte(args))
	}
	f.Add(uint8(0), []byte(`{"title":"x","op_id":"op_zz"}`))
	f.Add(uint8(1), []byte(`{"key":"","title":null}`))
	f.Add(uint8(7), []byte(`{"path":"../x","base64":"!!"}`))
	h := newHarness(f)
	h.ok(ada, "create_work_item", map[string]any{"title": "Seed one"})
	h.ok(ada, "create_work_item", map[string]any{"title": "Seed two"})
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		var args map[string]any
		if json.Unmarshal(raw, &args) != nil {
			return // not an arguments object: the SDK refuses it before any tool
		}
		tool := writeTools[int(which)%len(writeTools)]
		// Called on the session directly: the harness reports through
		// the fuzz function's F, which a fuzz target may not use.
		call := func(tool string, args map[string]any) *mcp.CallToolResult {
			res, err := h.CS.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: servers.CallerMeta(ada, h.Proof)})
			if err != nil {
				t.Fatalf("%s(%s): a protocol error: %v", tool, raw, err)
			}
			return res
		}
		res := call(tool, args)
		if res.IsError {
			class, ok := servers.ClassOf(res)
			if !ok {
				t.Fatalf("%s(%s): a refusal without a class: %s", tool, raw, text(res))
			}
			if class == authority.InternalError {
				t.Fatalf("%s(%s): internal_error: %s", tool, raw, text(res))
			}
		}
		if list := call("list_work_items", map[string]any{"limit": 200}); list.IsError {
			t.Fatalf("after %s(%s) the board no longer lists: %s", tool, raw, text(list))
		}
	})
}
