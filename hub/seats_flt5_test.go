package hub

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
)

// seatChildVar makes the test binary a seat's per-role child: "echo"
// serves the bench echo server over stdio, "hang" never answers the
// handshake, so its start stays in flight. Either way the child first
// writes its pid, a line, to the file seatChildPIDs names, so a test can
// tell one process of the child from the next.
const (
	seatChildVar  = "CREWLET_HUB_SEAT_CHILD"
	seatChildPIDs = "CREWLET_HUB_SEAT_CHILD_PIDS"
)

func init() {
	mode := os.Getenv(seatChildVar)
	if mode == "" {
		return
	}
	if f, err := os.OpenFile(os.Getenv(seatChildPIDs), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, os.Getpid())
		_ = f.Close()
	}
	if mode == "hang" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if err := benchEchoServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// seatChildCompany is a company whose seat alice has one per-role child,
// this binary in mode, writing its pids to pids; extra is one more
// variable of the child's env, so a revision can move its spec.
func seatChildCompany(t *testing.T, mode, pids, extra string) *config.Company {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(fmt.Appendf(nil, `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Alice
        handle: alice
        mcp_env: {echo: {%s: %s, %s: %q, EXTRA: %q}}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, shared: false, command: %q, startup_timeout_seconds: 120}
`, seatChildVar, mode, seatChildPIDs, pids, extra, exe))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pidsOf reads the pids the child's processes wrote, oldest first.
func pidsOf(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pid)
	}
	return out
}

// FLT-5: releasing a seat ends its child's start still in flight — the
// process that has not answered its handshake is gone when ReleaseSeat
// returns, long before the start would have timed out, and the seat has
// no instance left.
func TestReleaseEndsAStartInFlight(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	h, err := New(context.Background(), Options{Company: seatChildCompany(t, "hang", pids, "1"), StartupWait: 50 * time.Millisecond,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	inst := h.servers.instanceOf("echo@alice")
	if inst == nil {
		t.Fatal("alice's child was not started")
	}
	eventually(t, 15*time.Second, "the child's process is up", func() (bool, string) { return len(pidsOf(t, pids)) == 1, "" })
	if st := inst.Status(); st.State != upstream.StateStarting {
		t.Fatalf("the child is not starting: %+v", st)
	}
	pid := pidsOf(t, pids)[0]

	start := time.Now()
	if err := h.ReleaseSeat(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the release waited %v, as for the start to time out", took)
	}
	if h.servers.instanceOf("echo@alice") != nil {
		t.Fatal("the released seat still has a child")
	}
	if st := inst.Status(); st.State != upstream.StateStopped {
		t.Fatalf("the start in flight was not ended: %+v", st)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("the child's process %d outlived the release: %v", pid, err)
	}
}

// FLT-5: a seat's reconcile leaves a child that died to its own death
// watch — the same instance stays, and brings a new process up — unless
// the revision moved its spec: then the dead child is replaced by a new
// instance at once. A second death soon after the first waits a full
// restart delay (MCP-9), which is the window each reconcile lands in.
func TestSeatReconcileLeavesADeadChildToItsDeathWatch(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	env := func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }
	h, err := New(context.Background(), Options{Company: seatChildCompany(t, "echo", pids, "1"), StartupWait: 10 * time.Second, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	first := h.servers.instanceOf("echo@alice")
	if first == nil || first.Status().State != upstream.StateRunning {
		t.Fatal("alice's child is not running")
	}
	// runs waits until inst runs a process other than the ones before.
	runs := func(inst *upstream.Instance, before int) {
		t.Helper()
		eventually(t, 15*time.Second, "the child runs a new process", func() (bool, string) {
			st := inst.Status()
			return st.State == upstream.StateRunning && len(pidsOf(t, pids)) > before, fmt.Sprintf("%s, pids %v", st.State, pidsOf(t, pids))
		})
	}
	// killTwice kills inst's process, lets the death watch restart it at
	// once, and kills it again, which leaves it down for a while.
	killTwice := func(inst *upstream.Instance) {
		t.Helper()
		all := pidsOf(t, pids)
		if err := syscall.Kill(all[len(all)-1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		runs(inst, len(all))
		all = pidsOf(t, pids)
		if err := syscall.Kill(all[len(all)-1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, 15*time.Second, "the second death is seen", func() (bool, string) {
			st := inst.Status()
			return st.State == upstream.StateDown, string(st.State)
		})
	}

	killTwice(first)
	n := len(pidsOf(t, pids))
	// Claiming the seat again reconciles it against the same revision.
	if err := h.ClaimSeat(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if got := h.servers.instanceOf("echo@alice"); got != first {
		t.Fatal("the seat's reconcile replaced a dead child whose spec did not move")
	}
	runs(first, n)

	killTwice(first)
	if err := h.Apply(seatChildCompany(t, "echo", pids, "2")); err != nil {
		t.Fatal(err)
	}
	next := h.servers.instanceOf("echo@alice")
	if next == nil || next == first {
		t.Fatal("a dead child whose spec moved was not replaced")
	}
	if st := first.Status(); st.State != upstream.StateStopped {
		t.Fatalf("the replaced child: %+v", st)
	}
	eventually(t, 15*time.Second, "the new instance runs", func() (bool, string) {
		st := next.Status()
		return st.State == upstream.StateRunning, string(st.State)
	})
}
