package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logBuf collects the instance's JSON log lines.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) events(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func startTest(t testing.TB, spec Resolved, tune func(*Options)) (*Instance, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	opts := Options{
		Spec:         spec,
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		StartTimeout: 10 * time.Second,
		ProbeTimeout: time.Second,
		StopGrace:    500 * time.Millisecond,
		Host:         append(os.Environ(), "CREWLET_PLANTED_SECRET=do-not-pass"),
		Schedule:     &Schedule{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: -1},
	}
	if tune != nil {
		tune(&opts)
	}
	in := Start(opts)
	t.Cleanup(func() { in.Close() })
	return in, logs
}

func waitState(t testing.TB, in *Instance, want State, within time.Duration) Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := in.Status()
		if s.State == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s (cause %q), want %s after %s", s.State, s.Cause, want, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func callText(t *testing.T, in *Instance, tool string, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := in.Call(ctx, tool, json.RawMessage(args))
	if err != nil {
		return "", err
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var out struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal([]byte(text), &out) == nil && out.Text != nil {
		return *out.Text, nil
	}
	return text, nil
}

func TestInstanceServesAndKeepsRawAnnotations(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "go-sdk", nil), nil)
	waitState(t, in, StateRunning, 10*time.Second)
	tools := map[string]Tool{}
	for _, tl := range in.Tools() {
		tools[tl.Def.Name] = tl
	}
	if len(tools) != 5 {
		t.Fatalf("tools %v", tools)
	}
	if got := string(tools["echo"].Annotations); !strings.Contains(got, `"readOnlyHint":true`) {
		t.Fatalf("echo annotations %s", got)
	}
	if text, err := callText(t, in, "echo", `{"text":"hello"}`); err != nil || !strings.Contains(text, "hello") {
		t.Fatalf("echo: %q %v", text, err)
	}
	// MCP-4: stderr lines are debug events of the server.
	if ev := logs.events("server_stderr"); len(ev) == 0 || ev[0]["line"] != "test upstream ready" || ev[0]["server"] != "test-go-sdk" {
		t.Fatalf("server_stderr events %v", ev)
	}
}

// ENV-1: the child's environment is exactly the allowlist plus what the
// config declares; a variable planted in the engine's environment is absent,
// both as the server sees it and in /proc/<pid>/environ.
func TestInstanceChildEnvironment(t *testing.T) {
	spec := testSpec(t, "go-sdk", map[string]string{"DECLARED": "yes"})
	in, _ := startTest(t, spec, nil)
	waitState(t, in, StateRunning, 10*time.Second)
	text, err := callText(t, in, "env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	want := ChildEnv(spec, append(os.Environ(), "CREWLET_PLANTED_SECRET=do-not-pass"))
	got := strings.Split(text, "\n")
	if strings.Join(sortedCopy(got), "\n") != strings.Join(sortedCopy(want), "\n") {
		t.Fatalf("child env\n got %v\nwant %v", got, want)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", in.childPID()))
	if err != nil {
		t.Fatal(err)
	}
	environ := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if strings.Join(sortedCopy(environ), "\n") != strings.Join(sortedCopy(want), "\n") {
		t.Fatalf("/proc environ\n got %v\nwant %v", environ, want)
	}
	if strings.Contains(string(raw), "CREWLET_PLANTED_SECRET") {
		t.Fatal("planted variable reached the child")
	}
}

// MCP-5, MCP-6, MCP-7: kill -9 of the child is noticed at once; a call then
// is refused naming the cause and the next restart; the first death restarts
// at once and calls succeed again.
func TestInstanceKill9RestartsAtOnce(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		// A long base proves the first death does not wait for it.
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	pid := in.childPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for in.childPID() == pid || in.Status().State != StateRunning {
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %+v", in.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := callText(t, in, "echo", `{"text":"again"}`); err != nil {
		t.Fatalf("call after restart: %v", err)
	}
	ev := logs.events("server_exited")
	if len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]["cause"]), "killed by signal 9") {
		t.Fatalf("server_exited %v", ev)
	}
	if len(logs.events("server_restarted")) != 1 {
		t.Fatal("no server_restarted event")
	}
}

// MCP-6: a call in flight when the server dies is refused as the server
// being down, marked as possibly having taken effect.
func TestInstanceInFlightCallOnDeath(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	_, err := callText(t, in, "crash", `{}`)
	var down *DownError
	if !errors.As(err, &down) || !down.InFlight || !strings.Contains(down.Cause, "exited with status 3") {
		t.Fatalf("in-flight call: %#v (%v)", down, err)
	}
	if ev := logs.events("server_exited"); len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]["stderr_tail"]), "crash requested") {
		t.Fatalf("server_exited %v", ev)
	}
}

// MCP-5: a child that closes its session but runs on is down all the same,
// named for what it did; the engine ends its process and restarts it.
func TestInstanceSessionClosedWhileProcessRunsOn(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	pid := in.childPID()
	_, err := callText(t, in, "hang_up", `{}`)
	var down *DownError
	if !errors.As(err, &down) || !down.InFlight {
		t.Fatalf("in-flight call: %#v (%v)", down, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for in.childPID() == pid || in.Status().State != StateRunning {
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %+v", in.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ev := logs.events("server_exited")
	if len(ev) != 1 || ev[0]["cause"] != "it closed its session while its process ran on" {
		t.Fatalf("server_exited %v", ev)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("the process that hung up (pid %d) still runs after the restart", pid)
	}
}

// MCP-1: stop and crash leave no process of the tree behind, grandchildren
// included.
func TestInstanceLeavesNoGrandchild(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "go-sdk", nil), nil)
	waitState(t, in, StateRunning, 10*time.Second)
	text, err := callText(t, in, "spawn", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(text)
	if !alive(grandchild) {
		t.Fatalf("grandchild %d not running", grandchild)
	}
	in.Close()
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d outlived the stop", grandchild)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := in.Status(); s.State != StateStopped {
		t.Fatalf("after Close: %+v", s)
	}
	if _, err := in.Call(context.Background(), "echo", nil); err == nil {
		t.Fatal("a stopped instance served a call")
	}
}

// alive reports whether pid is a live process (a zombie is not alive).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// MCP-3: a legacy server that never answers server/discover still starts,
// through initialize, once the bounded probe gives up.
func TestInstanceLegacyServerIgnoringProbe(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "legacy", nil), nil)
	waitState(t, in, StateRunning, 15*time.Second)
	if text, err := callText(t, in, "old_tool", `{}`); err != nil || text != "legacy answer" {
		t.Fatalf("legacy call: %q %v", text, err)
	}
	hs := logs.events("server_handshake")
	if len(hs) != 1 || hs[0]["discover_answered"] != false || !strings.Contains(fmt.Sprint(hs[0]["discover_note"]), "did not answer") {
		t.Fatalf("handshake events %v", hs)
	}
	// The old tool sent no annotations at all: nothing is made up.
	if a := in.Tools()[0].Annotations; a != nil {
		t.Fatalf("annotations %s", a)
	}
}

// MCP-4, MCP-7: a server that fails at start surfaces its stderr tail and is
// retried on the doubling schedule; it costs nothing beyond itself.
func TestInstanceFailedStartRetriesOnSchedule(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "exit-at-start", nil), nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.events("server_restart_failed")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no retries: %+v", in.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := logs.events("mcp_server_failed")
	if len(first) != 1 || !strings.Contains(fmt.Sprint(first[0]["reason"]), "exited with status 4") {
		t.Fatalf("mcp_server_failed %v", first)
	}
	tails := logs.events("server_stderr_tail")
	if len(tails) == 0 || !strings.Contains(fmt.Sprint(tails[0]["stderr_tail"]), "API token rejected") {
		t.Fatalf("server_stderr_tail %v", tails)
	}
	retries := logs.events("server_restart_failed")
	if retries[0]["attempt"].(float64) >= retries[1]["attempt"].(float64) {
		t.Fatalf("attempts not counting: %v", retries)
	}
	if s := in.Status(); s.State != StateDown || s.NextRestart.IsZero() || !strings.Contains(s.Cause, "failed to start") {
		t.Fatalf("status %+v", s)
	}
}

func TestInstanceMissingCommand(t *testing.T) {
	in, logs := startTest(t, Resolved{Name: "ghost", Transport: TransportStdio, Command: "/nonexistent/mcp-server"}, nil)
	deadline := time.Now().Add(5 * time.Second)
	for len(logs.events("mcp_server_failed")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no mcp_server_failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var down *DownError
	if _, err := in.Call(context.Background(), "x", nil); !errors.As(err, &down) || down.InFlight {
		t.Fatalf("call on a server that never started: %v", err)
	}
}

// MCP-7: a spec that can never launch is not retried.
func TestInstanceNeverLaunches(t *testing.T) {
	// A schedule with no wait at all: a retry, if there were one, would
	// come at once, and its event is logged before the instance could
	// settle in any state.
	sched := &Schedule{Base: time.Nanosecond, Max: time.Nanosecond, Jitter: -1}
	in, logs := startTest(t, Resolved{Name: "empty", Transport: TransportStdio}, func(o *Options) { o.Schedule = sched })
	waitState(t, in, StateFailed, 5*time.Second)
	// Retry is what an apply does to a server that is down; one that can
	// never launch is not down, and stays failed.
	in.Retry()
	// Close returns once the instance's goroutine has ended, so every
	// event it was ever going to log is in the log now.
	if err := in.Close(); err != nil || in.Close() != nil {
		t.Fatal("Close twice failed")
	}
	if n := len(logs.events("server_restart_failed")) + len(logs.events("server_start_retry_scheduled")); n != 0 || sched.Attempt() != 0 {
		t.Fatalf("a spec that cannot launch was retried: %d retry events, schedule at attempt %d", n, sched.Attempt())
	}
	if ev := logs.events("mcp_server_failed"); len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]["reason"]), "can never launch") {
		t.Fatalf("mcp_server_failed %v", ev)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	return c
}

// MCP-8: a restart listing the same tools changes nothing; one listing
// different tools refiles, and says what was added.
func TestInstanceRestartWithDifferentTools(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "extra")
	var mu sync.Mutex
	var lists [][]string
	in, logs := startTest(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_EXTRA_TOOL": marker}), func(o *Options) {
		o.OnTools = func(tools []Tool) {
			var names []string
			for _, tl := range tools {
				names = append(names, tl.Def.Name)
			}
			mu.Lock()
			lists = append(lists, names)
			mu.Unlock()
		}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	kill := func() {
		pid := in.childPID()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		deadline := time.Now().Add(10 * time.Second)
		for in.childPID() == pid || in.Status().State != StateRunning {
			if time.Now().After(deadline) {
				t.Fatalf("not restarted: %+v", in.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	kill() // same tools: nothing refiled
	mu.Lock()
	if len(lists) != 1 {
		t.Fatalf("a restart with the same tools refiled: %v", lists)
	}
	mu.Unlock()
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(lists)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a restart with a new tool did not refile")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev := logs.events("server_catalogue_changed"); len(ev) != 1 || fmt.Sprint(ev[0]["added"]) != "[extra]" {
		t.Fatalf("server_catalogue_changed %v", ev)
	}
}

// MCP-10: a per-role child's restart waits until this node proves it holds
// the seat, asking again each heartbeat.
func TestInstanceRestartHeldBackWithoutLease(t *testing.T) {
	var mu sync.Mutex
	held := true
	in, logs := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		o.Seat = "alice"
		o.Heartbeat = 100 * time.Millisecond
		o.Lease = func() bool { mu.Lock(); defer mu.Unlock(); return held }
	})
	waitState(t, in, StateRunning, 10*time.Second)
	mu.Lock()
	held = false
	mu.Unlock()
	pid := in.childPID()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for len(logs.events("server_restart_held_back")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("restart not held back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := in.Status(); s.State == StateRunning {
		t.Fatal("restarted without the lease")
	}
	mu.Lock()
	held = true
	mu.Unlock()
	waitState(t, in, StateRunning, 5*time.Second)
	if ev := logs.events("server_restart_held_back"); ev[0]["seat"] != "alice" {
		t.Fatalf("held-back event %v", ev[0])
	}
}

// MCP-7, MCP-11: every wait after a failed start is logged, not only the
// first: a shared server's as server_start_retry_scheduled, a seat's child's
// as mcp_seat_retry_scheduled naming the seat, each with its attempt and
// the wait until the next.
func TestInstanceEveryRetryWaitIsLogged(t *testing.T) {
	for _, tc := range []struct {
		seat, event string
	}{
		{"", "server_start_retry_scheduled"},
		{"alice", "mcp_seat_retry_scheduled"},
	} {
		t.Run(tc.event, func(t *testing.T) {
			_, logs := startTest(t, testSpec(t, "exit-at-start", nil), func(o *Options) { o.Seat = tc.seat })
			deadline := time.Now().Add(10 * time.Second)
			for len(logs.events(tc.event)) < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d %s events after 10s, want 3 or more", len(logs.events(tc.event)), tc.event)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for n, ev := range logs.events(tc.event)[:3] {
				if ev["attempt"] != float64(n+1) || ev["retry_in_seconds"] == nil || ev["seat"] != tc.seat {
					t.Errorf("wait %d: %v", n+1, ev)
				}
			}
		})
	}
}

// MCP-6: a call that finds the server already down was never sent, even
// in the instant after the status says so and before the dead session is
// closed: it is not told it may have taken effect. The calls are made from
// OnStatus, at the very moment the status turns down.
func TestInstanceCallAfterDeathIsNotInFlight(t *testing.T) {
	var self atomic.Pointer[Instance]
	answers := make(chan error, 2)
	in, _ := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
		o.OnStatus = func(_, now Status) {
			if now.State != StateDown || len(answers) > 0 {
				return
			}
			in := self.Load()
			_, err := in.Call(context.Background(), "echo", json.RawMessage(`{"text":"late"}`))
			answers <- err
			_, _, err = in.CallRaw(context.Background(), "echo", json.RawMessage(`{"text":"late"}`))
			answers <- err
		}
	})
	self.Store(in)
	waitState(t, in, StateRunning, 10*time.Second)
	if _, err := callText(t, in, "crash", `{}`); err == nil {
		t.Fatal("the crash call was answered")
	}
	for _, via := range []string{"Call", "CallRaw"} {
		var down *DownError
		if err := <-answers; !errors.As(err, &down) || down.InFlight || !strings.Contains(down.Cause, "exited with status 3") {
			t.Fatalf("%s once down: %#v (%v)", via, down, err)
		}
	}
}
