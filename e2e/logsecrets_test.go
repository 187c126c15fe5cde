package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gavv/httpexpect/v2"
)

// MCP-4, MCP-11, OUT-1 against the built hub with -debug: a server that
// prints what it was given on its stderr (a ${VAR} from the hub's
// environment, one from the secret store, an operator token) puts none of
// it in the hub's log, neither in its live server_stderr lines, nor in
// server_exited's stderr_tail when it is killed, nor in the
// server_stderr_tail of a server that fails to start. The lines are there,
// with the values redacted.
func TestServerStderrKeepsSecretsOutOfTheLog(t *testing.T) {
	const (
		fromEnv   = "env-secret-value-8086"
		fromStore = "stored-secret-value-5150"
	)
	bin := buildEverythingServer(t)
	dir := t.TempDir()
	set := exec.Command(crewletBinary(t), "secrets", "set", "E2E_STORED", "--data-dir", dir)
	set.Stdin = strings.NewReader(fromStore)
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v %s", err, out)
	}
	say := `echo "starting with $LEAKY_TOKEN, $STORED_TOKEN and ` + e2eToken + `" >&2`
	cfg := companyWith(t, fmt.Sprintf(`  - name: leaky
    command: /bin/sh
    args: ["-c", %q]
    env: {LEAKY_TOKEN: "${E2E_LEAKY}", STORED_TOKEN: "${E2E_STORED}"}
  - name: refused
    command: /bin/sh
    args: ["-c", %q]
    env: {LEAKY_TOKEN: "${E2E_LEAKY}", STORED_TOKEN: "${E2E_STORED}"}
`, say+"; exec "+bin, say+"; exit 3"))
	h := startHubIn(t, dir, []string{"E2E_TOKEN=" + e2eToken, "E2E_LEAKY=" + fromEnv}, "--config", cfg, "-debug")

	// The live line, and the failed start's tail.
	waitLog(t, h, 15*time.Second, "server_stderr", `"server":"leaky"`, "starting with [REDACTED], [REDACTED] and [REDACTED]")
	waitLog(t, h, 15*time.Second, "server_stderr_tail", `"server":"refused"`, "starting with [REDACTED], [REDACTED] and [REDACTED]")

	// The tail of a server that dies.
	var leaky int
	for _, pid := range childrenOf(h.cmd.Process.Pid) {
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cmdline), bin) {
			leaky = pid
		}
	}
	if leaky == 0 {
		t.Fatalf("no child runs %s: %v", filepath.Base(bin), childrenOf(h.cmd.Process.Pid))
	}
	if err := syscall.Kill(leaky, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitLog(t, h, 15*time.Second, "server_exited", `"server":"leaky"`, "starting with [REDACTED], [REDACTED] and [REDACTED]")

	body := httpexpect.Default(t, h.baseURL()).GET("/mcp-servers").WithHeader("Authorization", "Bearer "+e2eToken).
		Expect().Status(http.StatusOK).Body().Raw()
	h.stop(t)
	for _, v := range []string{fromEnv, fromStore, e2eToken} {
		if strings.Contains(h.logs(), v) {
			t.Errorf("the hub's log holds %q", v)
		}
		if strings.Contains(body, v) {
			t.Errorf("GET /mcp-servers holds %q", v)
		}
	}
}
