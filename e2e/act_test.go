package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gavv/httpexpect/v2"
)

const actCompany = `
units:
  - id: core
    name: Core
    project: CORE
    space: CORE
    lead: ada
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Grace, handle: grace, kind: human}
api:
  auth:
    tokens:
      - {id: laptop, token: "${E2E_ADA}", seat: ada}
%s`

// OPS-2, OPS-6: the dashboard's transport against the built binary: a
// read needs no key; a write without an Idempotency-Key is refused 400
// op_id_invalid naming the header; the same write twice under one key
// files one item and answers the same; the same key from another
// principal is another operation; an op_id beside the key is refused; a
// revoked token is refused 401.
func TestOperatorActEndToEnd(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	write := func(extra string) {
		if err := os.WriteFile(cfg, []byte(strings.Replace(actCompany, "%s", extra, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`      - {id: phone, token: "${E2E_GRACE}", seat: grace}` + "\n")
	h := startHub(t, []string{"E2E_ADA=ada-secret-0001", "E2E_GRACE=grace-secret-0001"}, "--config", cfg)
	e := httpexpect.Default(t, h.baseURL())
	actAs := func(token, key string, body map[string]any) *httpexpect.Response {
		req := e.POST("/operator/act").WithHeader("Authorization", "Bearer "+token).WithJSON(body)
		if key != "" {
			req = req.WithHeader("Idempotency-Key", key)
		}
		return req.Expect()
	}
	const ada, grace = "ada-secret-0001", "grace-secret-0001"

	// A read.
	read := actAs(ada, "", map[string]any{"tool": "list_projects"}).Status(http.StatusOK).JSON().Object()
	read.NotContainsKey("isError") // a success, as over MCP: isError is left out
	read.Value("structuredContent").Object().Value("projects").Array().Length().IsEqual(1)

	// A write without the header.
	create := map[string]any{"tool": "create_work_item", "arguments": map[string]any{"title": "Ship it"}}
	refused := actAs(ada, "", create).Status(http.StatusBadRequest).JSON().Object()
	refused.Value("error").IsEqual("op_id_invalid")
	refused.Value("header").IsEqual("Idempotency-Key")
	refused.Value("message").String().Contains("Idempotency-Key")

	// The same write twice under one key: one item, the same answer.
	first := actAs(ada, "req-1", create).Status(http.StatusOK).JSON()
	first.Object().Value("structuredContent").Object().Value("key").IsEqual("CORE-1")
	actAs(ada, "req-1", create).Status(http.StatusOK).JSON().IsEqual(first.Raw())
	items := func() *httpexpect.Array {
		return actAs(ada, "", map[string]any{"tool": "list_work_items"}).Status(http.StatusOK).JSON().
			Object().Value("structuredContent").Object().Value("items").Array()
	}
	items().Length().IsEqual(1)

	// The same key from another principal: a second item.
	actAs(grace, "req-1", create).Status(http.StatusOK).JSON().
		Object().Value("structuredContent").Object().Value("key").IsEqual("CORE-2")
	items().Length().IsEqual(2)

	// An op_id argument beside the header.
	opID := first.Object().Value("structuredContent").Object().Value("op_id").String().NotEmpty().Raw()
	beside := map[string]any{"tool": "create_work_item", "arguments": map[string]any{"title": "Ship it", "op_id": opID}}
	actAs(ada, "req-2", beside).Status(http.StatusBadRequest).JSON().Object().Value("error").IsEqual("op_id_invalid")
	items().Length().IsEqual(2)

	// A revoked token: grace's leaves the company file, and the reload
	// applies it.
	write("")
	e.POST("/config/reload").WithHeader("Authorization", "Bearer "+ada).Expect().Status(http.StatusOK)
	actAs(grace, "", map[string]any{"tool": "list_projects"}).Status(http.StatusUnauthorized)
	actAs(grace, "req-3", create).Status(http.StatusUnauthorized)
	items().Length().IsEqual(2)
}
