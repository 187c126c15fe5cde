package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CAT-3: Find says in words what a node lacks for a box — bwrap, then
// prlimit, which sets a box's limits — so run_sandbox is omitted with a
// reason; with both it names the bwrap it found.
func TestFindSaysWhatIsMissing(t *testing.T) {
	real := map[string]string{}
	for _, tool := range []string{"bwrap", "prlimit"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		real[tool] = path
	}
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "no sandbox: bwrap (Debian's bubblewrap package) is not installed") {
		t.Fatalf("without bwrap: %v", err)
	}
	link := func(tool string) string {
		if err := os.Symlink(real[tool], filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(bin, tool)
	}
	bwrap := link("bwrap")
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "no sandbox: prlimit (util-linux) is not installed") {
		t.Fatalf("without prlimit: %v", err)
	}
	link("prlimit")
	if got, err := Find(); err != nil || got != bwrap {
		t.Fatalf("with both: %q %v", got, err)
	}
}

// Open's context holds the trial run of bwrap too: a caller that has given
// up is answered with its own end, and nothing is made.
func TestOpenWithAnEndedContextMakesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	parent := filepath.Join(t.TempDir(), "boxes")
	_, err := Open(ctx, Config{}, parent, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the box was not opened") {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Fatalf("the box's directory was made: %v", err)
	}
}
