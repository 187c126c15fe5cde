package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
)

const artifactsCompany = `
units:
  - id: core
    name: Core
    lead: ada
    project: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Grace, handle: grace, kind: human}
      - {name: Linus, handle: linus, kind: human}
      - {name: Helper, handle: helper}
api:
  auth:
    tokens:
      - {id: ada-laptop, token: "${E2E_ADA}", seat: ada}
      - {id: grace-laptop, token: "${E2E_GRACE}", seat: grace}
      - {id: linus-laptop, token: "${E2E_LINUS}", seat: linus}
      - {id: ops, token: "${E2E_OPS}", admin: true}
`

// ART-1, ART-2, ART-7, Build 7 through /operator/mcp of the built binary:
// ada creates an artifact and shares it with grace; grace reads it and
// publishes a version; linus, with no share, is told it does not exist;
// the url every answer carries serves the live version to a browser-like
// client presenting grace's token, sandboxed from the hub's API, and 404
// to linus's as to a missing id.
func TestArtifactsThroughTheOperatorSurface(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(artifactsCompany), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{"ada": "ada-secret-art-1", "grace": "grace-secret-art-1", "linus": "linus-secret-art-1"}
	h := startHub(t, []string{"E2E_ADA=" + tokens["ada"], "E2E_GRACE=" + tokens["grace"], "E2E_LINUS=" + tokens["linus"], "E2E_OPS=ops-secret-art-1"}, "--config", cfg)
	as := map[string]*mcp.ClientSession{}
	for who, tok := range tokens {
		cs, err := goSDKClient(t, h.mcpURL(), tok, "")
		if err != nil {
			t.Fatal(err)
		}
		as[who] = cs
	}
	ok := func(who, tool string, args map[string]any) map[string]any {
		t.Helper()
		res := callTool(t, as[who], tool, args)
		if res.IsError {
			t.Fatalf("%s %s: %s", who, tool, hubtest.Text(res))
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(hubtest.Text(res)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	created := ok("ada", "create_artifact", map[string]any{"kind": "html", "title": "Launch page", "content": "<h1>Launch v1</h1>"})
	id, _ := created["id"].(string)
	url, _ := created["url"].(string)
	if created["outcome"] != "applied" || url != h.baseURL()+"/artifacts/"+id+"/" || created["op_id"] == nil {
		t.Fatalf("create_artifact answered %v", created)
	}
	ok("ada", "share_artifact", map[string]any{"id": id, "to": "grace", "role": "contributor"})
	got := ok("grace", "get_artifact", map[string]any{"id": id})
	if got["role"] != "contributor" || got["writer"] != true {
		t.Fatalf("grace reads %v", got)
	}
	pub := ok("grace", "publish_artifact", map[string]any{"id": id, "base_version": 1, "edits": []any{map[string]any{"old_str": "v1", "new_str": "v2"}}})
	if pub["version"] != float64(2) {
		t.Fatalf("publish %v", pub)
	}
	stale := callTool(t, as["ada"], "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<h1>ada's</h1>"})
	if !stale.IsError || !strings.Contains(hubtest.Text(stale), "published by @grace") {
		t.Fatalf("a stale publish answered %s", hubtest.Text(stale))
	}
	for _, call := range []string{id, "art_ffffff"} {
		res := callTool(t, as["linus"], "get_artifact", map[string]any{"id": call})
		if !res.IsError || hubtest.Text(res) != `No artifact has the id "`+call+`".` {
			t.Fatalf("linus reads %s: %s", call, hubtest.Text(res))
		}
	}

	get := func(tok, u string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Accept", "text/html,application/xhtml+xml")
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) e2e")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get(tokens["grace"], url)
	if resp.StatusCode != 200 || body != "<h1>Launch v2</h1>" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("grace views %d %q %v", resp.StatusCode, body, resp.Header)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"sandbox", "connect-src 'none'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("no nosniff: %v", resp.Header)
	}
	if resp, _ := get(tokens["linus"], url); resp.StatusCode != 404 {
		t.Fatalf("linus views %d", resp.StatusCode)
	}
	if resp, _ := get(tokens["linus"], h.baseURL()+"/artifacts/art_ffffff/"); resp.StatusCode != 404 {
		t.Fatalf("a missing id views %d", resp.StatusCode)
	}
	if resp, _ := get("", url); resp.StatusCode != 401 {
		t.Fatalf("no token views %d", resp.StatusCode)
	}
}

// Build 8: the artifact store on its own (`crewlet artifacts-mcp --as
// admin`) over stdio: a plain client creates and reads an artifact.
func TestStandaloneArtifacts(t *testing.T) {
	cmd := exec.Command(crewletBinary(t), "artifacts-mcp", "--as", "admin", "--data-dir", t.TempDir())
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "create_artifact", Arguments: map[string]any{"kind": "doc", "title": "Standalone", "content": "# hello"}})
	if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), `"url":"/artifacts/art_`) {
		t.Fatalf("create_artifact: %v %s", err, hubtest.Text(res))
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "list_artifacts", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), "Standalone") {
		t.Fatalf("list_artifacts: %v %s", err, hubtest.Text(res))
	}
}
