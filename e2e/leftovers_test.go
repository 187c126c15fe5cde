package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MCP-1 across a hub killed outright: a child that started a grandchild in
// its group and one that left it with setsid keeps both running when the
// hub is killed with SIGKILL (nothing of the hub is left to stop them).
// The next start on the same data directory ends both, and only them.
func TestNextStartEndsWhatAKilledHubLeft(t *testing.T) {
	bin := buildEverythingServer(t)
	script := fmt.Sprintf(`sleep 300 & setsid sleep 301 & exec %q`, bin)
	cfg := companyWith(t, fmt.Sprintf(`  - name: forking
    command: /bin/sh
    args: ["-c", %q]
`, script))
	dir := t.TempDir()
	env := []string{"E2E_TOKEN=" + e2eToken}
	h := startHubIn(t, dir, env, "--config", cfg)

	kids := childrenOf(h.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("hub children %v", kids)
	}
	var inGroup, escaped int
	deadline := time.Now().Add(10 * time.Second)
	for inGroup == 0 || escaped == 0 {
		for _, pid := range childrenOf(kids[0]) {
			switch cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(cmd) {
			case "sleep\x00300\x00":
				inGroup = pid
			case "sleep\x00301\x00":
				escaped = pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchildren of %d: in group %d, escaped %d", kids[0], inGroup, escaped)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		for _, pid := range []int{inGroup, escaped} {
			if isSleep(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if pgid, _ := syscall.Getpgid(escaped); pgid == kids[0] {
		t.Fatalf("the setsid grandchild %d is still in the child's group", escaped)
	}
	// The hub writes the tree down as it sees it: wait until both are in
	// its record, as they would be a moment after any start.
	record := filepath.Join(dir, "children.json")
	deadline = time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(record)
		if strings.Contains(string(b), fmt.Sprintf(`"pid":%d,`, inGroup)) && strings.Contains(string(b), fmt.Sprintf(`"pid":%d,`, escaped)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record does not list %d and %d: %s", inGroup, escaped, b)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	if !isSleep(inGroup) || !isSleep(escaped) {
		t.Fatalf("after kill -9 of the hub: grandchild in group alive %v, escaped alive %v (nothing to prove)", isSleep(inGroup), isSleep(escaped))
	}

	h2 := startHubIn(t, dir, env, "--config", cfg)
	deadline = time.Now().Add(10 * time.Second)
	for isSleep(inGroup) || isSleep(escaped) {
		if time.Now().After(deadline) {
			t.Fatalf("still running after the next start: in group %v, escaped %v\n%s", isSleep(inGroup), isSleep(escaped), h2.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	logHas(t, h2.logs(), "leftover_processes_reaped", strconv.Itoa(inGroup), strconv.Itoa(escaped))
}

// isSleep reports whether pid is a live sleep (not a zombie, and not some
// other process that took the pid).
func isSleep(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return strings.Contains(s, "(sleep)") && i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}
