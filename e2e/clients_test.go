package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"

	mcpgo "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKClient connects go-sdk's client with a bearer token; version "" lets
// it negotiate (2026-07-28 against this hub).
func goSDKClient(t testing.TB, url, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hubtest.Client(token)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "0"}, nil).
		Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// refusalClass reads the class off a refused result as any client sees it:
// in structuredContent and in _meta.
func refusalClass(structured any, meta map[string]any) (fromStructured, fromMeta string) {
	b, _ := json.Marshal(structured)
	var body struct {
		Class string `json:"class"`
	}
	_ = json.Unmarshal(b, &body)
	m, _ := meta["crewlet/refusal"].(string)
	return body.Class, m
}

type colleagueAnswer struct {
	Match *struct {
		Handle string `json:"handle"`
		Kind   string `json:"kind"`
	} `json:"match"`
	MatchedBy  string `json:"matched_by"`
	Candidates []struct {
		Handle string `json:"handle"`
	} `json:"candidates"`
}

func decodeColleague(t testing.TB, v any) colleagueAnswer {
	t.Helper()
	b, _ := json.Marshal(v)
	var a colleagueAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("lookup_colleague answer %s: %v", b, err)
	}
	return a
}

// The run command: the embedded default company, a generated token kept
// owner-only, and the endpoint printed.
func TestDefaultHubStartsAndSaysHowToConnect(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	out := strings.Join(h.stdout, "\n")
	if !strings.Contains(out, h.mcpURL()) || !strings.Contains(out, filepath.Join(h.dataDir, "operator-token")) {
		t.Fatalf("stdout does not say how to connect:\n%s", out)
	}
	if strings.Contains(out, h.token) || strings.Contains(h.logs(), h.token) {
		t.Fatal("the operator token was printed or logged")
	}
	fi, err := os.Stat(filepath.Join(h.dataDir, "operator-token"))
	if err != nil || fi.Mode().Perm() != 0o600 || len(h.token) < 32 {
		t.Fatalf("operator-token: %v %v len %d", fi.Mode(), err, len(h.token))
	}
}

// go-sdk's client on MCP 2026-07-28 (stateless, server/discover).
func TestGoSDKClient(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	lt, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var lookup *mcp.Tool
	for _, tool := range lt.Tools {
		if tool.Name == "lookup_colleague" {
			lookup = tool
		}
	}
	if lookup == nil || lookup.Meta["crewlet/source"] != "builtin" {
		t.Fatalf("lookup_colleague not listed as builtin among %d tools", len(lt.Tools))
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "lookup_colleague", Arguments: map[string]any{"query": "ADMIN"}})
	if err != nil || res.IsError {
		t.Fatalf("lookup_colleague: %v %+v", err, res)
	}
	if a := decodeColleague(t, res.StructuredContent); a.Match == nil || a.Match.Handle != "admin" || a.Match.Kind != "human" {
		t.Fatalf("lookup_colleague(ADMIN) = %+v", a)
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("unknown tool answered a protocol error: %v", err)
	}
	if s, m := refusalClass(res.StructuredContent, res.Meta); !res.IsError || s != "not_found" || m != "not_found" {
		t.Fatalf("unknown tool: isError %v class %q/%q", res.IsError, s, m)
	}
}

// mcp-go's client, an independent implementation, pinned to 2025-11-25
// (sessions as handles).
func TestMCPGoClient(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	c, err := mcpgo.NewStreamableHttpClient(h.mcpURL(), transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + h.token}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcpgotypes.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcpgotypes.Implementation{Name: "e2e-mcp-go", Version: "0"}
	ir, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if ir.ProtocolVersion != "2025-11-25" || ir.ServerInfo.Name != "crewlet" {
		t.Fatalf("initialize: %+v", ir)
	}
	lt, err := c.ListTools(ctx, mcpgotypes.ListToolsRequest{})
	listed := false
	for _, tool := range lt.Tools {
		listed = listed || tool.Name == "lookup_colleague"
	}
	if err != nil || !listed {
		t.Fatalf("lookup_colleague not listed: %v", err)
	}
	call := func(name string, args map[string]any) *mcpgotypes.CallToolResult {
		req := mcpgotypes.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	res := call("lookup_colleague", map[string]any{"query": "assist"})
	if a := decodeColleague(t, res.StructuredContent); res.IsError || a.Match == nil || a.Match.Handle != "assistant" || a.MatchedBy != "partial" {
		t.Fatalf("lookup_colleague(assist) = %+v", a)
	}
	res = call("no_such_tool", nil)
	var meta map[string]any
	if res.Meta != nil {
		meta = res.Meta.AdditionalFields
	}
	if s, m := refusalClass(res.StructuredContent, meta); !res.IsError || s != "not_found" || m != "not_found" {
		t.Fatalf("unknown tool: isError %v class %q/%q", res.IsError, s, m)
	}
}

// No token, a wrong token, or a token in the wrong scheme: 401 with a
// Bearer challenge, and nothing served.
func TestUnauthenticatedIs401(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	for name, hdr := range map[string]string{"none": "", "wrong": "Bearer not-the-token", "scheme": "Token " + h.token} {
		req, _ := http.NewRequest("POST", h.mcpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: status %d, challenge %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if _, err := goSDKClient(t, h.mcpURL(), "not-the-token", ""); err == nil {
		t.Error("go-sdk client connected with a wrong token")
	}
}
