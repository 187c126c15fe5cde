package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

// Issue 40, MCP-1: a second `crewlet serve` on a data directory a hub is
// running on touches nothing of it. It exits at once, non-zero, saying
// which hub holds the directory; the running hub's stdio child is the
// same process afterwards, a call through it still answers, and nothing
// was reaped.
func TestSecondServeOnTheSameDataDirKillsNothing(t *testing.T) {
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
`, bin))
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if res := callTool(t, cs, "test_simple_text", map[string]any{}); res.IsError {
		t.Fatalf("first call: %+v", res)
	}
	kids := childrenOf(h.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("hub children %v", kids)
	}
	child := kids[0]
	started := procStart(t, child)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, crewletBinary(t), "serve", "--listen", "127.0.0.1:0", "--data-dir", h.dataDir, "--config", h.configPath)
	second.Env = append(os.Environ(), "E2E_TOKEN="+e2eToken)
	var stdout, stderr bytes.Buffer
	second.Stdout, second.Stderr = &stdout, &stderr
	err = second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || ctx.Err() != nil {
		t.Fatalf("the second serve: %v (want a non-zero exit at once)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	want := fmt.Sprintf("another crewlet serve is running on data directory %s (pid %d)", h.dataDir, h.cmd.Process.Pid)
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("the second serve's stderr does not say %q:\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "leftover_processes_reaped") || strings.Contains(h.logs(), "leftover_processes_reaped") {
		t.Errorf("something was reaped:\n%s", stderr.String())
	}
	if got := procStart(t, child); got != started {
		t.Fatalf("the running hub's child %d is gone (start %q, now %q)", child, started, got)
	}
	res := callTool(t, cs, "test_simple_text", map[string]any{})
	if res.IsError || !strings.Contains(hubtest.Text(res), "This is a simple text response for testing") {
		t.Fatalf("a call through the running hub's child after the second serve: %+v", res)
	}
	if kids := childrenOf(h.cmd.Process.Pid); len(kids) != 1 || kids[0] != child {
		t.Fatalf("the hub's children are now %v, want %d alone", kids, child)
	}
}

// procStart is a live process's start time (field 22 of its stat line),
// which tells it from a process that took its pid; "" once it is gone or
// a zombie.
func procStart(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 || fields[0] == "Z" {
		return ""
	}
	return fields[19]
}
