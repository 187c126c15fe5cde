package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inspectorToolsList runs the pinned MCP Inspector CLI's `tools/list` with
// --strict, its check that every tool schema is portable across clients,
// and returns its exit code, stdout and stderr. Exit 6 (SCHEMA_UNPORTABLE)
// means errors; warnings are printed on stderr, one "Warning: tool ..."
// block each, whatever the exit code.
func inspectorToolsList(t *testing.T, url string, header ...string) (int, string, string) {
	t.Helper()
	args := []string{filepath.Join(npmInstalled(t), ".bin", "mcp-inspector"), "--cli", url, "--transport", "http",
		"--method", "tools/list", "--strict"}
	for _, h := range header {
		args = append(args, "--header", h)
	}
	cmd := exec.CommandContext(ctxT(t), pinnedNode(t), args...)
	cmd.Env = nodeEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("inspector: %v\nstderr: %s", err, stderr.String())
	return 0, "", ""
}

// Issue 29 (OPS-1): every tool the operator catalogue lists over MCP has a
// schema the MCP Inspector's --strict check passes with no error and no
// warning: no bare true, no type array, no schema that constrains nothing.
// The hub runs on its embedded default, as the README's first command
// starts it, so the catalogue is the one a newcomer meets.
func TestInspectorStrictPassesHubTools(t *testing.T) {
	// The check itself first, on a server whose one tool has each finding,
	// so a pinned Inspector that stopped checking cannot pass the hub.
	loose := mcp.NewServer(&mcp.Implementation{Name: "loose", Version: "0"}, nil)
	loose.AddTool(&mcp.Tool{Name: "loose", Description: "A tool whose schema no strict client can map.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"a":{"type":["null","string"]},"b":{"type":"array","items":true},"c":{"description":"anything"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return loose }, nil))
	t.Cleanup(srv.Close)
	code, _, stderr := inspectorToolsList(t, srv.URL)
	if code != 6 || strings.Count(stderr, `Error: tool "loose"`) != 1 || strings.Count(stderr, `Warning: tool "loose"`) != 2 {
		t.Fatalf("the Inspector's --strict on a loose schema exited %d (want 6, one error, two warnings):\n%s", code, stderr)
	}

	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	code, stdout, stderr := inspectorToolsList(t, h.mcpURL(), "Authorization: Bearer "+h.token)
	var listed struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
		t.Fatalf("inspector's tools/list is not a listing (exit %d): %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	// The tools that had findings when the issue was filed, from each
	// first-party server, must be among those checked.
	names := map[string]bool{}
	for _, tool := range listed.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"set_artifact_schema", "write_artifact_data", "query_artifact_data", "update_work_item",
		"save_page", "lookup_colleague"} {
		if !names[want] {
			t.Errorf("the operator catalogue lists no %s; listed %d tools", want, len(listed.Tools))
		}
	}
	if code != 0 || strings.Contains(stderr, "Warning:") || strings.Contains(stderr, "Error:") ||
		strings.Contains(stderr, "Schema portability") {
		t.Fatalf("the Inspector's --strict on the hub's %d tools exited %d:\n%s", len(listed.Tools), code, stderr)
	}
}
