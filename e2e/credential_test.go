package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gavv/httpexpect/v2"
)

// A company file that declares no operator credential still makes a hub
// somebody can reach: it gets one generated exactly as the embedded
// company does (kept in the data directory, mode 0600, printed where it is,
// never the token itself), and `crewlet config check` says so.
func TestCompanyWithoutCredentialGetsGeneratedToken(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "servers-only.yaml")
	if err := os.WriteFile(cfg, []byte("mcp_servers:\n  - {name: ghost, command: /nonexistent/bin/mcp-ghost}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(crewletBinary(t), "config", "check", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no operator credential") || !strings.Contains(string(out), "operator-token") {
		t.Fatalf("config check of a file with no credential: %v\n%s", err, out)
	}

	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="}, "--config", cfg)
	tokenFile := filepath.Join(h.dataDir, "operator-token")
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 || len(h.token) < 32 {
		t.Fatalf("operator-token: %v %v, token of %d characters", fi, err, len(h.token))
	}
	stdout := strings.Join(h.stdout, "\n")
	if !strings.Contains(stdout, tokenFile) || strings.Contains(stdout, h.token) || strings.Contains(h.logs(), h.token) {
		t.Fatalf("stdout does not say where the token is, or shows it:\n%s", stdout)
	}
	e := httpexpect.Default(t, h.baseURL())
	e.GET("/tools").WithHeader("Authorization", "Bearer "+h.token).Expect().Status(http.StatusOK)
	// The generated credential is an administrator's: a person who only has
	// it must be able to see and fix the servers.
	e.GET("/mcp-servers").WithHeader("Authorization", "Bearer "+h.token).Expect().Status(http.StatusOK).
		JSON().Object().Value("servers").Array().Length().IsEqual(1)

	// CREWLET_OPERATOR_TOKEN wins over the kept file.
	h2 := startHub(t, []string{"CREWLET_OPERATOR_TOKEN=from-the-environment-0123456789abcdef"}, "--config", cfg)
	httpexpect.Default(t, h2.baseURL()).GET("/tools").
		WithHeader("Authorization", "Bearer from-the-environment-0123456789abcdef").Expect().Status(http.StatusOK)
}
