package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The command's tests run the binary a person runs: built once from this
// package into a directory the process removes when the tests end, then
// executed with its exit code, stdout and stderr read apart (which of the
// two carries the usage is half of what is tested).
var binary struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// crewletBinary builds ./cmd/crewlet once per test process.
func crewletBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		if binary.dir, binary.err = os.MkdirTemp("", "crewlet-cmd-test-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "crewlet")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// ran is what one run of the binary did.
type ran struct {
	code           int
	stdout, stderr string
}

// runCrewlet runs the binary with args in a fresh working directory (so
// a default ./.crewlet lands there), stdin as given, and env added to the
// process's environment less the operator token. A command that should
// have answered at once and did not is killed rather than left to hang
// the suite.
func runCrewlet(t *testing.T, stdin string, env []string, args ...string) ran {
	t.Helper()
	// Built first: the minute is the command's, not the build's, which on
	// a loaded machine (and for every parallel case waiting on it) can
	// take longer.
	bin := crewletBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CREWLET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("crewlet %s did not end within a minute\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	r := ran{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r
}

func (r ran) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// isUsageOf reports whether out starts with cmd's usage line.
func isUsageOf(out, cmd string) bool {
	return strings.HasPrefix(out, "usage: "+cmd+" ") || strings.HasPrefix(out, "usage: "+cmd+"\n")
}

// hasUsageOf reports whether out holds cmd's usage line.
func hasUsageOf(out, cmd string) bool {
	return strings.Contains(out, "usage: "+cmd+" ") || strings.Contains(out, "usage: "+cmd+"\n")
}
