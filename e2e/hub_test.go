package e2e_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// crewletBinary builds the hub once per test binary run: the e2e suites test
// the program a user runs, not the packages behind it.
func crewletBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crewlet-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "crewlet")
		cmd := exec.Command("go", "build", "-o", binPath, "../cmd/crewlet")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/crewlet: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// hubProc is a running hub binary.
type hubProc struct {
	cmd     *exec.Cmd
	dataDir string
	addr    string
	token   string // the generated operator token, when running the default company
	// configPath is the company file, when one was given.
	configPath string
	stdout     []string
	stderr     *os.File
	lines      chan string
	// ca, for a hub serving HTTPS, issued its certificate, certFile.
	ca       *hubtest.CA
	certFile string
}

func (h *hubProc) mcpURL() string { return h.baseURL() + "/operator/mcp" }
func (h *hubProc) baseURL() string {
	if h.ca != nil {
		return "https://" + h.addr
	}
	return "http://" + h.addr
}

// client is an HTTP client for the hub: one that trusts its CA when it
// serves HTTPS.
func (h *hubProc) client() *http.Client {
	if h.ca != nil {
		return h.ca.Client("")
	}
	return http.DefaultClient
}

// startHubTLS is startHub serving HTTPS with a certificate a CA made for
// the test issued.
func startHubTLS(t testing.TB, env []string, args ...string) *hubProc {
	t.Helper()
	dir := t.TempDir()
	ca := hubtest.NewCA(t)
	cert, key := filepath.Join(t.TempDir(), "hub.pem"), filepath.Join(t.TempDir(), "hub-key.pem")
	ca.Issue(t, 1, cert, key)
	h := launchHub(t, dir, env, append([]string{"--tls-cert", cert, "--tls-key", key}, args...)...)
	h.ca, h.certFile = ca, cert
	h.awaitReady(t, 20*time.Second)
	return h
}

// startHub runs `crewlet serve` on a free port in a fresh data directory and
// waits until it answers. extra args and env are added to the command.
func startHub(t testing.TB, env []string, args ...string) *hubProc {
	t.Helper()
	return startHubIn(t, t.TempDir(), env, args...)
}

// startHubIn is startHub on a given data directory, for a hub restarted on
// the data an earlier one left.
func startHubIn(t testing.TB, dir string, env []string, args ...string) *hubProc {
	t.Helper()
	h := launchHub(t, dir, env, args...)
	h.awaitReady(t, 20*time.Second)
	return h
}

// launchHub starts `crewlet serve` on a free port in dir and returns at
// once; awaitReady waits until it answers. Apart, so several hubs that
// need each other to start (a fleet) can be launched side by side.
func launchHub(t testing.TB, dir string, env []string, args ...string) *hubProc {
	t.Helper()
	h := &hubProc{dataDir: dir}
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	h.stderr = stderr
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, args...)
	cmd := exec.Command(crewletBinary(t), all...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd = cmd
	h.lines = make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *hubProc) awaitReady(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for h.addr == "" {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("hub exited before listening; stderr:\n%s", h.logs())
			}
			h.stdout = append(h.stdout, line)
			if strings.Contains(line, "MCP endpoint:") {
				b, err := os.ReadFile(filepath.Join(h.dataDir, "listen-addr"))
				if err != nil {
					t.Fatalf("listen-addr: %v", err)
				}
				h.addr = strings.TrimSpace(string(b))
			}
		case <-deadline:
			t.Fatalf("hub did not start in %s; stdout %q; stderr:\n%s", within, h.stdout, h.logs())
		}
	}
	// Keep draining stdout so the hub never blocks on a full pipe.
	go func() {
		for range h.lines {
		}
	}()
	if b, err := os.ReadFile(filepath.Join(h.dataDir, "operator-token")); err == nil {
		h.token = strings.TrimSpace(string(b))
	}
	resp, err := h.client().Get(h.baseURL() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func (h *hubProc) logs() string {
	b, _ := os.ReadFile(h.stderr.Name())
	return string(b)
}

// stop ends the hub with SIGTERM, as an operator would, and checks that it
// shut down cleanly and in time.
func (h *hubProc) stop(t testing.TB) {
	if h.cmd.ProcessState != nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hub exited uncleanly after SIGTERM: %v\nstderr:\n%s", err, h.logs())
		}
	case <-time.After(15 * time.Second):
		// SIGQUIT first: a Go program prints where every goroutine is,
		// which says what it was stuck on.
		_ = syscall.Kill(h.cmd.Process.Pid, syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		t.Errorf("hub did not stop within 15s of SIGTERM; the end of its stderr:\n%s", tailString(h.logs(), 16<<10))
	}
	h.stderr.Close()
}

func (h *hubProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
