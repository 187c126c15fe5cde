package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CFG-5, CFG-6, CAT-11, REF-5: a per-role template gets one child per agent
// seat that declares credentials for it, each started with its own block
// over its unit's; a seat with no block and a person get none. The children's
// tools are those seats' own: the operator catalogue does not offer them, and
// a call to one answers forbidden, not not_found.
func TestPerRoleChildrenPerSeat(t *testing.T) {
	bin := buildEverythingServer(t)
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    mcp_env:
      tracker: {TRACKER_URL: "https://tracker.example", WHO: "unit-default"}
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Alice
        handle: alice
        mcp_env:
          tracker: {WHO: "alice", TOKEN: "${E2E_ALICE}"}
      - name: Bob
        handle: bob
        mcp_env:
          tracker: {WHO: "bob", TOKEN: "${E2E_BOB}"}
  - id: other
    name: Other
    roles:
      - {name: Carol, handle: carol}
api:
  auth:
    tokens:
      - {id: ada, token: "${E2E_TOKEN}", seat: ada}
mcp_servers:
  - name: tracker
    shared: false
    command: %q
    tool_prefix: trk_
    trust: auto
`, bin)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, []string{"E2E_TOKEN=" + e2eToken, "E2E_ALICE=alice-secret-1", "E2E_BOB=bob-secret-1"}, "--config", cfg)

	kids := childByServer(t, h)
	if len(kids) != 2 || kids["alice"] == 0 || kids["bob"] == 0 || kids["alice"] == kids["bob"] {
		t.Fatalf("children by seat: %v", kids)
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", kids["alice"]))
	if !strings.Contains(string(env), "TRACKER_URL=https://tracker.example") || !strings.Contains(string(env), "TOKEN=alice-secret-1") ||
		strings.Contains(string(env), "bob-secret") {
		t.Fatalf("alice's child environment: %q", env)
	}

	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "trk_test_simple_text", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := refusalClass(res.StructuredContent, res.Meta); !res.IsError || s != "forbidden" {
		t.Fatalf("operator call to a seat's tool: %q %s", s, hubtest.Text(res))
	}
	e := httpexpect.Default(t, h.baseURL())
	authed(e, "GET", "/tools").Expect().Status(http.StatusOK).JSON().Object().Value("sources").Object().NotContainsKey("mcp:tracker")
	row := authed(e, "GET", "/mcp-servers").Expect().Status(http.StatusOK).JSON().Object().Value("servers").Array().Value(0).Object()
	row.Value("shared").IsEqual(false)
	row.Value("state").IsEqual("Running")
	page := authed(e, "GET", "/mcp-servers/tracker").Expect().Status(http.StatusOK).JSON().Object()
	page.Value("reach").String().Contains("per-role")
	page.Value("tools").Array().NotEmpty()
	page.Value("tools").Array().Value(0).Object().Value("source").IsEqual("mcp:tracker")
}
