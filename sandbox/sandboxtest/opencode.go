// Package sandboxtest finds what tests of coding runs need outside Go: the
// OpenCode CLI the repository pins.
package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
)

// OpenCode is the path of the OpenCode binary e2e/package.json pins, as
// `npm ci --prefix e2e` installs it (its linux-x64 build), found from any
// package of the repository; CREWLET_OPENCODE names another copy of the
// same version. A test fails, saying how to install it, when it is absent.
func OpenCode(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("CREWLET_OPENCODE")
	if bin == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, "e2e", "node_modules", "opencode-linux-x64", "bin", "opencode")
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("OpenCode is not installed at %s (%v): run `npm ci --prefix e2e` from the repository root, which installs the version e2e/package.json pins", bin, err)
	}
	return bin
}

// repoRoot is the nearest directory at or above the working directory (a
// test's package) that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", os.ErrNotExist
		}
		dir = up
	}
}
