package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The test binary also plays this command's roles (echo-server, relay,
// sdk-proxy), which is how a real run (TestRunMeasuresEveryPath) starts
// them: as the HTTP echo server, as the hub's stdio child and as the
// references, by executing itself with the role as the first argument. Every goroutine a
// test starts must be stopped by its owner before the tests end.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if role, ok := roles[os.Args[1]]; ok {
			// Stopped by a signal, as the real commands are.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err := role(ctx, os.Args[2:])
			stop()
			if err != nil {
				fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if hubBuild.dir != "" {
			_ = os.RemoveAll(hubBuild.dir)
		}
		os.Exit(code)
	}))
}

// hubBuild is the crewlet binary the tests that run a hub share: built
// once per test binary, since each link costs seconds.
var hubBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// hubBinary builds cmd/crewlet, once, and answers its path.
func hubBinary(t *testing.T) string {
	t.Helper()
	hubBuild.once.Do(func() {
		if hubBuild.dir, hubBuild.err = os.MkdirTemp("", "crewlet-load-test-"); hubBuild.err != nil {
			return
		}
		hubBuild.path = filepath.Join(hubBuild.dir, "crewlet")
		if out, err := exec.Command("go", "build", "-o", hubBuild.path, "github.com/crewlet/hub/cmd/crewlet").CombinedOutput(); err != nil {
			hubBuild.err = fmt.Errorf("go build ./cmd/crewlet: %v\n%s", err, out)
		}
	})
	if hubBuild.err != nil {
		t.Fatal(hubBuild.err)
	}
	return hubBuild.path
}
