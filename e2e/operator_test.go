package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const revocationCompany = `
units:
  - id: ops
    name: Operations
    lead: ada
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Helper, handle: helper}
api:
  auth:
    tokens:
      - {id: ada-laptop, token: "${E2E_ADA}", seat: ada}
%s
`

func writeCompany(t testing.TB, path string, extraTokens ...string) {
	t.Helper()
	var b strings.Builder
	for _, tok := range extraTokens {
		b.WriteString("      - " + tok + "\n")
	}
	doc := strings.Replace(revocationCompany, "%s", b.String(), 1)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// OPS-1: a token revoked while a client's session is open stops that
// client's very next call, whether the revision is applied by
// POST /config/reload or by SIGHUP, and for both protocol eras.
func TestRevokedTokenStopsNextCall(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	writeCompany(t, cfg, `{id: ci-one, token: "${E2E_CI1}"}`, `{id: ci-two, token: "${E2E_CI2}"}`)
	h := startHub(t, []string{"E2E_ADA=ada-secret-0001", "E2E_CI1=ci-secret-0001", "E2E_CI2=ci-secret-0002"}, "--config", cfg)
	if h.token != "" {
		t.Fatal("a hub with a company file wrote a generated token")
	}
	call := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "lookup_colleague", Arguments: map[string]any{"query": "ada"}})
		return err
	}
	legacy, err := goSDKClient(t, h.mcpURL(), "ci-secret-0001", "2025-11-25") // a session as a handle
	if err != nil {
		t.Fatal(err)
	}
	modern, err := goSDKClient(t, h.mcpURL(), "ci-secret-0002", "") // stateless
	if err != nil {
		t.Fatal(err)
	}
	if call(legacy) != nil || call(modern) != nil {
		t.Fatal("calls before revocation failed")
	}

	// Revoke ci-one through the admin route.
	writeCompany(t, cfg, `{id: ci-two, token: "${E2E_CI2}"}`)
	e := httpexpect.Default(t, h.baseURL())
	e.POST("/config/reload").WithHeader("Authorization", "Bearer ci-secret-0002").Expect().Status(http.StatusForbidden)
	e.POST("/config/reload").WithHeader("Authorization", "Bearer ada-secret-0001").Expect().Status(http.StatusOK)
	if err := call(legacy); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("legacy session's call after revocation: %v", err)
	}
	if err := call(modern); err != nil {
		t.Fatalf("a token that was not revoked stopped working: %v", err)
	}

	// Revoke ci-two by SIGHUP.
	writeCompany(t, cfg)
	h.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for call(modern) == nil {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not revoke the token within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A document with a violation is refused whole and the current revision
	// stays in force.
	if err := os.WriteFile(cfg, []byte("units: [{id: Bad}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.POST("/config/reload").WithHeader("Authorization", "Bearer ada-secret-0001").Expect().
		Status(http.StatusUnprocessableEntity).JSON().Object().Value("error").String().Contains("units[0].id")
	e.GET("/tools").WithHeader("Authorization", "Bearer ada-secret-0001").Expect().Status(http.StatusOK)
}

// CAT-2: GET /tools over real HTTP, as a consumer groups it by source.
func TestGetToolsCatalogue(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	e := httpexpect.Default(t, h.baseURL())
	e.GET("/tools").Expect().Status(http.StatusUnauthorized)
	obj := e.GET("/tools").WithHeader("Authorization", "Bearer "+h.token).Expect().
		Status(http.StatusOK).HasContentType("application/json").JSON().Object()
	obj.Value("sources").Object().Value("builtin").Number().Gt(1)
	row := obj.Value("tools").Array().Filter(func(_ int, v *httpexpect.Value) bool {
		return v.Object().Value("name").String().Raw() == "lookup_colleague"
	}).Value(0).Object()
	row.Value("source").String().IsEqual("builtin")
	row.Value("delivers").String().IsEmpty()
	row.Value("arg_count").Number().IsEqual(1)
	row.Value("annotations").Object().IsEqual(map[string]any{
		"read_only": "yes", "destructive": "no", "idempotent": "yes", "open_world": "no",
	})
	e.GET("/healthz").Expect().Status(http.StatusOK).JSON().Object().Value("status").IsEqual("ok")
}
