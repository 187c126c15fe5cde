package upstream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testLogger is a debug logger whose events a test reads.
func testLogger() (*slog.Logger, *logBuf) {
	logs := &logBuf{}
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

// waitUntil polls cond until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killOnCleanup makes sure a process a test expects gone does not outlive
// the test when the test fails.
func killOnCleanup(t *testing.T, p proc) {
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
}

// recorded reads a ledger file's processes.
func recorded(t *testing.T, path string) []proc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ledgerFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("ledger %s: %v", b, err)
	}
	var out []proc
	for _, tr := range f.Trees {
		out = append(out, tr...)
	}
	return out
}

// MCP-1: a grandchild that called setsid has left the child's process
// group, so the group signal misses it; the stop still ends it, because
// the tree was walked while its parent ran. The ledger says nothing is
// left once the instance is closed.
func TestInstanceStopEndsGrandchildThatLeftTheGroup(t *testing.T) {
	ledgerPath := filepath.Join(t.TempDir(), "children.json")
	ledger, err := OpenLedger(ledgerPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := startTest(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_SETSID": "1"}), func(o *Options) {
		o.Ledger = ledger
		o.WatchTree = 20 * time.Millisecond
	})
	waitState(t, in, StateRunning, 10*time.Second)
	escapee := spawnEscapee(t, in)
	waitUntil(t, 5*time.Second, "the ledger lists the grandchild", func() bool {
		return slices.Contains(recorded(t, ledgerPath), escapee)
	})
	in.Close()
	if escapee.running() {
		t.Fatalf("the grandchild %d that left the group outlived the stop", escapee.PID)
	}
	if left := recorded(t, ledgerPath); len(left) != 0 {
		t.Fatalf("the ledger still lists %v after the stop", left)
	}
}

// MCP-7 (the seed: a restart comes once the engine has reaped what the old
// process left behind): a child that dies leaves a grandchild that called
// setsid, reparented away from the tree; it is ended before the restart.
func TestInstanceRestartEndsWhatTheDeadChildLeft(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_SETSID": "1"}), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
		o.WatchTree = 20 * time.Millisecond
	})
	waitState(t, in, StateRunning, 10*time.Second)
	escapee := spawnEscapee(t, in)
	in.mu.Lock()
	tr := in.child.tree
	in.mu.Unlock()
	waitUntil(t, 5*time.Second, "the walk sees the grandchild", func() bool {
		return slices.Contains(tr.procs(), escapee)
	})
	pid := in.childPID()
	if _, err := callText(t, in, "crash", `{}`); err == nil {
		t.Fatal("crash answered")
	}
	waitUntil(t, 10*time.Second, "restarted", func() bool {
		return in.childPID() != pid && in.Status().State == StateRunning
	})
	if escapee.running() {
		t.Fatalf("the grandchild %d of the dead child runs beside its restart", escapee.PID)
	}
}

// spawnEscapee has the child start a grandchild in a session of its own.
func spawnEscapee(t *testing.T, in *Instance) proc {
	t.Helper()
	text, err := callText(t, in, "spawn", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(text)
	p, st, ok := identify(pid)
	if !ok || st.pgid == in.childPID() {
		t.Fatalf("grandchild %d: running %v, group %d (the child's is %d)", pid, ok, st.pgid, in.childPID())
	}
	killOnCleanup(t, p)
	return p
}

// sleeper starts `sleep 300` as a test's own child, in a process group of
// its own when group is set, and reaps it when the test ends.
func sleeper(t *testing.T, group bool, script string) (*exec.Cmd, proc) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if script != "" {
		cmd = exec.Command("/bin/sh", "-c", script)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, _, ok := identify(cmd.Process.Pid)
	if !ok {
		t.Fatalf("sleeper %d not running", cmd.Process.Pid)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, p
}

func writeLedger(t *testing.T, path, boot string, trees ...[]proc) {
	t.Helper()
	b, _ := json.Marshal(ledgerFile{Boot: boot, Trees: trees})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A node's next start ends what the last one left running: a recorded
// group leader with its whole group (a member it never recorded
// included), a recorded process that is no leader. A pid now held by
// another process (another start time) is never signalled, nor is
// anything recorded in another boot. The record is empty afterwards.
func TestOpenLedgerReapsLeftoversOnly(t *testing.T) {
	dir := t.TempDir()
	_, loner := sleeper(t, false, "")
	_, leader := sleeper(t, true, "sleep 300 & wait")
	var member proc
	waitUntil(t, 5*time.Second, "the group's second process", func() bool {
		kids := childrenOf(leader.PID)
		if len(kids) == 0 {
			return false
		}
		var ok bool
		member, _, ok = identify(kids[0])
		return ok
	})
	killOnCleanup(t, member)
	_, stranger := sleeper(t, false, "")
	_, elsewhere := sleeper(t, false, "")

	path := filepath.Join(dir, "children.json")
	reused := proc{PID: stranger.PID, Start: stranger.Start + 1}
	writeLedger(t, path, bootID(), []proc{leader}, []proc{{PID: 1 << 22, Start: 1}, loner, reused})
	other := filepath.Join(dir, "other-boot.json")
	writeLedger(t, other, "another-boot", []proc{elsewhere})

	logger, logs := testLogger()
	if _, err := OpenLedger(path, logger); err != nil {
		t.Fatal(err)
	}
	for _, p := range []proc{loner, leader, member} {
		if p.running() {
			t.Errorf("leftover %d still runs", p.PID)
		}
	}
	if !stranger.running() {
		t.Error("a process that took a recorded pid was killed")
	}
	if left := recorded(t, path); len(left) != 0 {
		t.Errorf("the record still lists %v", left)
	}
	ev := logs.events("leftover_processes_reaped")
	if len(ev) != 1 || fmt.Sprint(ev[0]["pids"]) != fmt.Sprint([]float64{float64(leader.PID), float64(loner.PID)}) {
		t.Errorf("leftover_processes_reaped %v, want pids %d %d", ev, leader.PID, loner.PID)
	}

	if _, err := OpenLedger(other, nil); err != nil {
		t.Fatal(err)
	}
	if !elsewhere.running() {
		t.Error("a process recorded in another boot was killed")
	}
}

// MCP-1, issue 40: a record whose writer still runs names that node's live
// children, not leftovers: opening it is refused, nothing it names is
// signalled, and the record is left as it was. A record this process
// wrote itself, or one whose writer is gone, is reaped as before.
func TestOpenLedgerLeavesALiveWritersChildren(t *testing.T) {
	path := filepath.Join(t.TempDir(), "children.json")
	_, writer := sleeper(t, false, "")
	_, child := sleeper(t, true, "")
	b, _ := json.Marshal(ledgerFile{Boot: bootID(), Owner: writer, Trees: [][]proc{{child}}})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	logger, logs := testLogger()
	_, err := OpenLedger(path, logger)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("belongs to a node that still runs (pid %d)", writer.PID)) {
		t.Errorf("opening a live node's record: %v", err)
	}
	if !child.running() {
		t.Fatal("a live node's child was killed")
	}
	if len(logs.events("leftover_processes_reaped")) != 0 {
		t.Error("a live node's children were reported reaped")
	}
	if after, _ := os.ReadFile(path); string(after) != string(b) {
		t.Errorf("the live node's record was rewritten: %s", after)
	}

	// The writer gone, the same record names leftovers.
	writer.signal(syscall.SIGKILL)
	waitUntil(t, 5*time.Second, "the writer's end", func() bool { return !writer.running() })
	if _, err := OpenLedger(path, nil); err != nil {
		t.Fatal(err)
	}
	if child.running() {
		t.Error("the leftover of a node that is gone still runs")
	}
}

// A record cut short (a crash while it was written elsewhere) names nothing
// for sure: nothing is killed, and the node starts.
func TestOpenLedgerToleratesAnUnreadableRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "children.json")
	if err := os.WriteFile(path, []byte(`{"boot_id":"`), 0o600); err != nil {
		t.Fatal(err)
	}
	logger, logs := testLogger()
	if _, err := OpenLedger(path, logger); err != nil {
		t.Fatal(err)
	}
	if len(logs.events("child_process_record_unreadable")) != 1 {
		t.Fatal("an unreadable record was not reported")
	}
	if _, err := OpenLedger(filepath.Join(t.TempDir(), "no", "such", "dir", "children.json"), nil); err == nil {
		t.Fatal("a ledger that cannot be written opened")
	}
}
