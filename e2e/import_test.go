package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewlet/hub/servers/state/statetest"
)

// `crewlet config import` on a Cursor configuration holding a literal API
// key: the printed mcp_servers block references it as ${NAME}, the value
// is sealed in the data directory's secret store with --store-secrets, and
// it appears in neither the output nor any file in the clear.
func TestConfigImportSealsLiteralSecrets(t *testing.T) {
	bin := crewletBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	secret := "lin_api_e2e_literal_9f3a"
	doc := `{"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse", "headers": {"Authorization": "Bearer ` + secret + `"}}}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	run := func(args ...string) (string, string) {
		cmd := exec.Command(bin, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("crewlet %v: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	out, errOut := run("config", "import", cfg, "--store-secrets", "--data-dir", data)
	if !strings.Contains(out, "Authorization: Bearer ${LINEAR_HEADER_AUTHORIZATION}") || strings.Contains(out+errOut, secret) {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if !strings.Contains(errOut, "sealed LINEAR_HEADER_AUTHORIZATION") {
		t.Fatalf("stderr: %s", errOut)
	}
	// Issue 28: imported servers are pinned unless the person vouches
	// for them with --trust.
	if !strings.Contains(out, "trust: pinned") || !strings.Contains(errOut, "--trust") {
		t.Fatalf("an import without --trust: stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if trusted, _ := run("config", "import", cfg, "--trust", "--data-dir", data); !strings.Contains(trusted, "trust: auto") || strings.Contains(trusted, "pinned") {
		t.Fatalf("an import with --trust:\n%s", trusted)
	}
	if list, _ := run("secrets", "list", "--data-dir", data); !strings.Contains(list, "LINEAR_HEADER_AUTHORIZATION") {
		t.Fatalf("secrets list: %s", list)
	}
	if hits := statetest.Grep(t, data, secret); len(hits) != 0 {
		t.Fatalf("the credential is in the clear in %v", hits)
	}
	// Without consent nothing is stored, and the name to store is said.
	out, errOut = run("config", "import", cfg, "--data-dir", filepath.Join(dir, "other"))
	if strings.Contains(out+errOut, secret) || !strings.Contains(errOut, "crewlet secrets set LINEAR_HEADER_AUTHORIZATION") {
		t.Fatalf("without --store-secrets: %s / %s", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); err == nil {
		t.Fatal("a data directory was made without consent")
	}
}
