package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cutServer is a go-sdk server over streamable HTTP on loopback whose
// answers to the tools named cut_* are cut half way: the first half of
// the answer's event is written, and the connection closed under the
// rest. Every other request, the next call included, is the SDK's.
func cutServer(t *testing.T) string {
	t.Helper()
	up := mcp.NewServer(&mcp.Implementation{Name: "cutting", Version: "0"}, nil)
	answer := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "whole"}}}, nil
	}
	schema := map[string]any{"type": "object"}
	up.AddTool(&mcp.Tool{Name: "cut_write", Description: "may write", InputSchema: schema}, answer)
	up.AddTool(&mcp.Tool{Name: "cut_read", Description: "reads", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, answer)
	up.AddTool(&mcp.Tool{Name: "whole", Description: "answers whole", InputSchema: schema}, answer)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg callOf
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && strings.HasPrefix(msg.Params.Name, "cut_") {
				w.Header().Set("Content-Type", "text/event-stream")
				resp := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
				cutAfter(w, []byte("event: message\ndata: "+resp[:len(resp)/2]))
				return
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		for ss := range up.Sessions() {
			ss.Close()
		}
	})
	return srv.URL + "/"
}

// REF-6, MCP-6: a server's answer cut off on its way back (its HTTP
// response broke mid-answer, the server and its session fine) is refused
// at once as unavailable in the engine's words: which server, that the
// answer was cut off, and, for a tool not known to be read-only, that the
// call may have taken effect. It says nothing of the server being down,
// its session ending or a restart, none of which happened, and the next
// call goes through.
func TestCutAnswerIsRefusedAsCutOff_MCP6(t *testing.T) {
	doc := fmt.Sprintf(`units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: cutting, url: %q}
`, cutServer(t))
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Options{Company: c,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h.Handler())
	t.Cleanup(func() { h.Close(); front.Close() })
	cs := hubtest.Connect(t, front.URL+"/operator/mcp", "ada-token-123456", "2025-11-25")
	call := func(tool string) (downAnswer, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s reached the client as a protocol error: %v", tool, err)
		}
		return readDown(t, res), time.Since(start)
	}
	for _, tool := range []string{"cut_write", "cut_read"} {
		got, took := call(tool)
		if got.class != authority.Unavailable || !strings.Contains(got.sentence, `"cutting"`) ||
			!strings.Contains(got.sentence, "was cut off") || got.data["server"] != "cutting" {
			t.Fatalf("%s: %+v", tool, got)
		}
		for _, wrong := range []string{"not running", "session ended", "restart", "Retry shortly"} {
			if strings.Contains(got.sentence, wrong) {
				t.Fatalf("%s said %q, which did not happen: %s", tool, wrong, got.sentence)
			}
		}
		mayHave := strings.Contains(got.sentence, "may have taken effect") && got.data["may_have_taken_effect"] == true
		if readOnly := tool == "cut_read"; mayHave == readOnly || (readOnly && got.data["may_have_taken_effect"] != nil) {
			t.Fatalf("%s (read-only %v) says it may have taken effect: %v: %+v", tool, readOnly, mayHave, got)
		}
		// The session's end was once waited for, 2 s, before answering.
		if took >= 2*time.Second {
			t.Fatalf("%s was answered after %s: it waited for a session's end", tool, took)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whole", Arguments: map[string]any{}})
	if err != nil || res.IsError || textOf(res) != "whole" {
		t.Fatalf("the next call: %v %+v", err, res)
	}
}
