package hub

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OUT-1: what a third-party server writes of its tools (a description, a
// title, its schemas, its _meta) reaches every model offered the tool and
// every client that lists the catalogue, so it passes the rules its
// results pass before it is filed: a configured secret and an operator
// token in it reach neither tools/list on either revision nor GET /tools,
// and the server's crewlet/ keys arrive renamed.
func TestListedToolsAreSanitised_OUT1(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "leaky-lister", Version: "0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "described",
		Title:       "title " + leakTxt,
		Description: "Use it with " + leakTxt,
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"q": map[string]any{"type": "string", "description": "the query; " + leakTxt}}},
		Meta: mcp.Meta{"crewlet/delivers": "everywhere", "note": leakTxt},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	th := keyedHub(t, "lister", hubtest.ServeMCP(t, s, nil))
	waitTool(t, th, "described")

	e, _ := th.company.Get("described")
	if strings.Contains(e.Description, upKey) || !strings.Contains(e.Description, sanitize.Redacted) {
		t.Fatalf("the catalogue filed the description %q", e.Description)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		rec := &wireRecorder{}
		cs, err := hubtest.DialClient(t, th.url+"/operator/mcp", &http.Client{Transport: hubtest.Bearer{Token: adaTok, Base: rec}}, version, nil)
		if err != nil {
			t.Fatal(err)
		}
		var listed *mcp.Tool
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "described" {
				listed = tool
			}
		}
		if listed == nil {
			t.Fatalf("%s: the tool is not listed", version)
		}
		raw := rec.take()
		for _, leak := range []string{upKey, adaTok} {
			if i := strings.Index(raw, leak); i >= 0 {
				t.Errorf("%s: tools/list carried %q: ...%s...", version, leak, raw[max(0, i-120):min(len(raw), i+40)])
			}
		}
		if strings.Contains(raw, `"crewlet/delivers":"everywhere"`) {
			t.Errorf("%s: the server's own crewlet/delivers reached the client as the hub's", version)
		}
	}

	req, _ := http.NewRequest("GET", th.url+"/tools", nil)
	req.Header.Set("Authorization", "Bearer "+adaTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !json.Valid(body) || strings.Contains(string(body), upKey) || strings.Contains(string(body), adaTok) {
		t.Fatalf("GET /tools (%s) carried a secret or is not JSON: %.300s", resp.Status, body)
	}
}
