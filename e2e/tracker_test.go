package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The newcomer's path: the embedded company's unit owns a project, so an item
// is filed with nothing but a title, through the operator surface, and the
// next read on the node sees it (WR-1, WR-3, CAT-4).
func TestDefaultHubFilesAWorkItem(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "create_work_item", map[string]any{"title": "Hello from the README"})
	if res.IsError {
		t.Fatalf("create_work_item: %s", resultText(res))
	}
	var created map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &created)
	if created["outcome"] != "applied" || !strings.Contains(string(b), "CORE-1") {
		t.Fatalf("create_work_item answered %s", b)
	}
	list := callTool(t, cs, "list_work_items", map[string]any{})
	if list.IsError || !strings.Contains(resultText(list), "Hello from the README") {
		t.Fatalf("list_work_items after create: %s", resultText(list))
	}
	httpexpect.Default(t, h.baseURL()).GET("/tools").WithHeader("Authorization", "Bearer "+h.token).
		Expect().Status(http.StatusOK).JSON().Object().Value("sources").Object().Value("builtin").Number().Gt(5)
}

// CAT-4: a company on a vendor tracker gets none of the native tools.
func TestVendorTrackerGetsNoNativeTools(t *testing.T) {
	doc := `units: [{id: core, name: Core, project: CORE, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
tracker: {backend: jira}
api: {auth: {tokens: [{id: ada, token: "${E2E_TOKEN}", seat: ada}]}}
`
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, []string{"E2E_TOKEN=" + e2eToken}, "--config", cfg)
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		if strings.Contains(tool.Name, "work_item") || tool.Name == "list_projects" {
			t.Errorf("a company on a vendor tracker is offered %s", tool.Name)
		}
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := refusalClass(res.StructuredContent, res.Meta); s != "not_found" {
		t.Fatalf("create_work_item on a vendor tracker: %q", s)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "state")); err == nil {
		t.Error("a company on a vendor tracker opened a native store")
	}
}
