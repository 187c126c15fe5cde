package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testCompany = `
units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Bot, handle: bot}
api:
  auth:
    tokens:
      - {id: laptop, token: "${ADA_TOKEN}", seat: ada}
      - {id: ci, token: "${CI_TOKEN}"}
`

type testHub struct {
	*Hub
	url string
	env map[string]string
	mu  sync.Mutex
}

// newTestHub serves a hub of testCompany on a loopback port; each change,
// if any, adjusts its options first.
func newTestHub(t *testing.T, change ...func(*Options)) *testHub {
	t.Helper()
	c, err := config.Parse([]byte(testCompany))
	if err != nil {
		t.Fatal(err)
	}
	th := &testHub{env: map[string]string{"ADA_TOKEN": "ada-token-123456", "CI_TOKEN": "ci-token-123456"}}
	lookup := func(k string) (string, bool) {
		th.mu.Lock()
		defer th.mu.Unlock()
		v, ok := th.env[k]
		return v, ok
	}
	opts := Options{
		Company:      c,
		Env:          lookup,
		MaxBodyBytes: 64 << 10,
		Reload:       func() (*config.Company, error) { return config.Parse([]byte(testCompany)) },
		FirstParty: []FirstParty{{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
			s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
			servers.Register(s, tr, nil, echoTool())
			return s
		}}},
	}
	for _, ch := range change {
		ch(&opts)
	}
	h, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() { h.Close(); srv.Close() })
	th.Hub, th.url = h, srv.URL
	return th
}

func callEcho(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, echoOut) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	var out echoOut
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
	}
	return res, out
}

// OPS-1, OPS-4: both protocol eras are served, and every call is attributed
// by the credential on its own request.
func TestOperatorMCPBothErasAndAttribution(t *testing.T) {
	th := newTestHub(t)
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", version)
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s", got)
			}
			lt, err := cs.ListTools(context.Background(), nil)
			if err != nil || len(lt.Tools) != 1 || lt.Tools[0].Name != "echo" {
				t.Fatalf("tools: %+v %v", lt, err)
			}
			if src := lt.Tools[0].Meta[servers.MetaSource]; src != "builtin" {
				t.Fatalf("source meta %v", src)
			}
			_, out := callEcho(t, cs, map[string]any{"text": "hi"})
			if out != (echoOut{Text: "hi", Seat: "ada", Kind: "human", Op: "laptop", Admin: true}) {
				t.Fatalf("bound token wrote as %+v", out)
			}
			ci := hubtest.Connect(t, th.url+"/operator/mcp", "ci-token-123456", version)
			if _, out := callEcho(t, ci, map[string]any{"text": "hi"}); out != (echoOut{Text: "hi", Seat: "token:ci", Kind: "operator", Op: "ci"}) {
				t.Fatalf("unbound token wrote as %+v", out)
			}
		})
	}
}

// REF-5 and the classes the router produces on the operator surface.
func TestOperatorRefusals(t *testing.T) {
	th := newTestHub(t)
	own := NewCatalogue()
	_ = own.Add(entry("seat_only", SourceMCP("github")))
	th.router.seats = func() []*Catalogue { return []*Catalogue{own} }
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
	class := func(name string, args map[string]any) (authority.Class, string) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: protocol error %v", name, err)
		}
		c, _ := servers.ClassOf(res)
		return c, res.Content[0].(*mcp.TextContent).Text
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want authority.Class
	}{
		{"no_such_tool", nil, authority.NotFound},
		{"seat_only", nil, authority.Forbidden},
		{"echo", map[string]any{}, authority.Invalid},
		{"echo", map[string]any{"text": "x", "fail": "conflict"}, authority.Conflict},
		{"echo", map[string]any{"text": "x", "fail": "internal"}, authority.InternalError},
	} {
		if got, text := class(tc.tool, tc.args); got != tc.want {
			t.Errorf("%s %v: class %q (%s), want %q", tc.tool, tc.args, got, text, tc.want)
		}
	}
	// unavailable: the server behind the tool is gone.
	th.mounts[0].Close()
	if got, text := class("echo", map[string]any{"text": "x"}); got != authority.Unavailable || strings.Contains(text, "closed") {
		t.Errorf("dead server: class %q, text %q", got, text)
	}
}

// OUT-1 through the router: control characters stripped, a configured
// credential redacted, NUL-bearing text rejected with a sentence.
func TestOperatorSanitisesResults(t *testing.T) {
	th := newTestHub(t)
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
	res, out := callEcho(t, cs, map[string]any{"text": "x", "emit": `a\x1b[31mred\x1b[0m\x07 key ci-token-123456 end`})
	if res.IsError || out.Text != "ared key [REDACTED] end" {
		t.Fatalf("sanitised to %q (%v)", out.Text, res.IsError)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, "ci-token") || strings.Contains(text, "\x1b") {
		t.Fatalf("text content leaks: %q", text)
	}
	res, _ = callEcho(t, cs, map[string]any{"text": "x", "emit": `bin\x00ary`})
	if c, _ := servers.ClassOf(res); !res.IsError || c != authority.InternalError {
		t.Fatalf("binary result: error %v class %q", res.IsError, c)
	}
}

// OPS-1: a token revoked while a client's session is open stops its very
// next call, in both eras.
func TestRevokedTokenStopsNextCall(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			th := newTestHub(t)
			cs := hubtest.Connect(t, th.url+"/operator/mcp", "ci-token-123456", version)
			if res, _ := callEcho(t, cs, map[string]any{"text": "a"}); res.IsError {
				t.Fatal("first call refused")
			}
			th.mu.Lock()
			delete(th.env, "CI_TOKEN")
			th.env["CI_TOKEN"] = "rotated-token-99999"
			th.mu.Unlock()
			if err := th.Reload(); err != nil {
				t.Fatal(err)
			}
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "b"}})
			if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
				t.Fatalf("call after revocation: %v", err)
			}
		})
	}
}

func do(t *testing.T, method, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

func TestOperatorHTTPGuards(t *testing.T) {
	th := newTestHub(t)
	mcpURL := th.url + "/operator/mcp"
	base := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	good := "Bearer ada-token-123456"
	tests := []struct {
		name   string
		hdr    map[string]string
		body   string
		status int
	}{
		{"no token", base, initBody, 401},
		{"bad token", with(map[string]string{"Authorization": "Bearer nope"}), initBody, 401},
		{"basic auth", with(map[string]string{"Authorization": "Basic YTpi"}), initBody, 401},
		{"good token", with(map[string]string{"Authorization": good}), initBody, 200},
		{"rebinding host", with(map[string]string{"Authorization": good, "Host": "evil.example:80"}), initBody, 403},
		{"foreign origin", with(map[string]string{"Authorization": good, "Origin": "http://evil.example"}), initBody, 403},
		{"loopback origin", with(map[string]string{"Authorization": good, "Origin": "http://localhost:3000"}), initBody, 200},
		{"oversized body", with(map[string]string{"Authorization": good}), `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`, 413},
		{"malformed json", with(map[string]string{"Authorization": good}), `{"jsonrpc":`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if resp := do(t, "POST", mcpURL, tc.hdr, tc.body); resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if resp := do(t, "GET", th.url+"/healthz", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if resp := do(t, "GET", th.url+"/tools", nil, ""); resp.StatusCode != 401 {
		t.Fatalf("tools without token %d", resp.StatusCode)
	}
	if resp := do(t, "POST", th.url+"/config/reload", map[string]string{"Authorization": "Bearer ci-token-123456"}, ""); resp.StatusCode != 403 {
		t.Fatalf("reload by a non-admin %d", resp.StatusCode)
	}
	if resp := do(t, "POST", th.url+"/config/reload", map[string]string{"Authorization": good}, ""); resp.StatusCode != 200 {
		t.Fatalf("reload by an admin %d", resp.StatusCode)
	}
}

// CAT-2: GET /tools lists source, the four hints (unknown included),
// delivers and the argument count.
func TestGetTools(t *testing.T) {
	th := newTestHub(t)
	req, _ := http.NewRequest("GET", th.url+"/tools", nil)
	req.Header.Set("Authorization", "Bearer ada-token-123456")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Tools   []map[string]any `json:"tools"`
		Sources map[string]int   `json:"sources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Tools) != 1 || body.Sources["builtin"] != 1 {
		t.Fatalf("body %+v", body)
	}
	row := body.Tools[0]
	want := `map[annotations:map[destructive:no idempotent:unknown open_world:unknown read_only:no] arg_count:3 delivers:thread description:Echo text and the caller. name:echo source:builtin]`
	if got := fmt.Sprint(row); got != want {
		t.Fatalf("row\n got %s\nwant %s", got, want)
	}
}

func TestHubCloseTwice(t *testing.T) {
	th := newTestHub(t)
	if err := th.Close(); err != nil {
		t.Fatal(err)
	}
	if err := th.Close(); err != nil {
		t.Fatal(err)
	}
}
