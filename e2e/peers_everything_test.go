package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// go-sdk's conformance everything-server, a peer the e2e tests drive (see
// peers_test.go): built from the module cache once per test binary.

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
