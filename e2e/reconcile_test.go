package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gavv/httpexpect/v2"
)

// CFG-7, CFG-8: an apply leaves a server whose resolved spec did not change
// alone (same process), restarts one whose credential rotated (new process),
// retires one whose credential stopped resolving, and stops one the
// revision removed; its tools leave the catalogue.
func TestApplyReconcilesOnlyWhatChanged(t *testing.T) {
	bin := buildEverythingServer(t)
	servers := fmt.Sprintf(`  - name: steady
    command: %q
    tool_prefix: steady_
    env: {WHO: steady}
  - name: rotating
    command: %q
    tool_prefix: rot_
    env: {WHO: rotating, KEY: "${E2E_ROTATING}"}
  - name: doomed
    command: %q
    tool_prefix: doomed_
    env: {WHO: doomed, KEY: "${E2E_DOOMED}"}
  - name: removed
    command: %q
    tool_prefix: removed_
    env: {WHO: removed}
`, bin, bin, bin, bin)
	h := hubWithServers(t, servers)
	seal := func(name, value string) {
		cmd := exec.Command(crewletBinary(t), "secrets", "set", name, "--data-dir", h.dataDir)
		cmd.Stdin = strings.NewReader(value)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("secrets set %s: %v %s", name, err, out)
		}
	}
	e := httpexpect.Default(t, h.baseURL())
	reload := func() { authed(e, "POST", "/config/reload").Expect().Status(http.StatusOK) }
	seal("E2E_ROTATING", "first-value-1")
	seal("E2E_DOOMED", "doomed-value-1")
	reload()
	waitRunning(t, e, "steady", "rotating", "doomed", "removed")
	before := childByServer(t, h)

	seal("E2E_ROTATING", "second-value-2")
	del := exec.Command(crewletBinary(t), "secrets", "delete", "E2E_DOOMED", "--data-dir", h.dataDir)
	if out, err := del.CombinedOutput(); err != nil {
		t.Fatalf("secrets delete: %v %s", err, out)
	}
	// Drop "removed" from the company.
	cfg, _ := os.ReadFile(h.configPath)
	i := strings.Index(string(cfg), "  - name: removed")
	if err := os.WriteFile(h.configPath, cfg[:i], 0o600); err != nil {
		t.Fatal(err)
	}
	reload()
	waitRunning(t, e, "steady", "rotating")
	after := childByServer(t, h)
	if after["steady"] != before["steady"] {
		t.Errorf("steady was restarted (%d -> %d) though nothing about it changed", before["steady"], after["steady"])
	}
	if after["rotating"] == before["rotating"] || after["rotating"] == 0 {
		t.Errorf("rotating kept its process (%d) across a rotated credential", before["rotating"])
	}
	if after["doomed"] != 0 || after["removed"] != 0 {
		t.Errorf("retired or removed servers still run: %v", after)
	}
	logHas(t, h.logs(), "mcp_server_retired", `"server":"doomed"`, "E2E_DOOMED")
	tools := authed(e, "GET", "/tools").Expect().Status(http.StatusOK).JSON().Object().Value("sources").Object()
	tools.NotContainsKey("mcp:removed")
	tools.NotContainsKey("mcp:doomed")
	tools.ContainsKey("mcp:steady")
}

func waitRunning(t *testing.T, e *httpexpect.Expect, names ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows := authed(e, "GET", "/mcp-servers").Expect().JSON().Object().Value("servers").Array()
		state := map[string]string{}
		for _, v := range rows.Iter() {
			o := v.Object()
			state[o.Value("name").String().Raw()] = o.Value("state").String().Raw()
		}
		ok := true
		for _, n := range names {
			ok = ok && state[n] == "Running"
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all running: %v", state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// childByServer maps each running server to its child's pid, read from the
// WHO each entry declares in its env: the hub hands a child exactly that.
func childByServer(t *testing.T, h *hubProc) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, pid := range childrenOf(h.cmd.Process.Pid) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if who, ok := strings.CutPrefix(kv, "WHO="); ok {
				out[who] = pid
			}
		}
	}
	return out
}

// CAT-9, CFG-7: editing tool_annotations refiles the server's tools with
// the new hints at the next apply, without restarting it.
func TestAnnotationEditRefilesWithoutRestart(t *testing.T) {
	bin := buildEverythingServer(t)
	servers := func(readOnly bool) string {
		return fmt.Sprintf(`  - name: everything
    command: %q
    env: {WHO: everything}
    tool_annotations:
      test_simple_text: {read_only: %v}
`, bin, readOnly)
	}
	h := hubWithServers(t, servers(true))
	e := httpexpect.Default(t, h.baseURL())
	hint := func() string {
		rows := authed(e, "GET", "/tools").Expect().Status(http.StatusOK).JSON().Object().Value("tools").Array()
		for _, v := range rows.Iter() {
			o := v.Object()
			if o.Value("name").String().Raw() == "test_simple_text" {
				return o.Value("annotations").Object().Value("read_only").String().Raw()
			}
		}
		return ""
	}
	if got := hint(); got != "yes" {
		t.Fatalf("read_only before the edit: %q", got)
	}
	before := childByServer(t, h)["everything"]
	doc, _ := os.ReadFile(h.configPath)
	edited := strings.Replace(string(doc), "{read_only: true}", "{read_only: false}", 1)
	if err := os.WriteFile(h.configPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	authed(e, "POST", "/config/reload").Expect().Status(http.StatusOK)
	if got := hint(); got != "no" {
		t.Fatalf("read_only after the edit: %q", got)
	}
	if after := childByServer(t, h)["everything"]; after != before || after == 0 {
		t.Fatalf("the server was restarted (%d -> %d) for an annotation edit", before, after)
	}
}
