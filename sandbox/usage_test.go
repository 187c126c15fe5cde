package sandbox

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A workspace the host cannot count — directories nested past the 256
// levels it walks — is held as past its disk and file limits, said in
// words; a write is refused in words naming no host path; Close removes
// it. 256 levels are counted.
func TestWorkspaceTooDeepToCountIsHeldAtItsLimits(t *testing.T) {
	parent := t.TempDir()
	b := openBoxIn(t, Config{}, parent, Env(os.Environ(), nil))
	res := run(t, b, `mkdir -p "$(printf 'd/%.0s' $(seq 256))"`)
	if res.Exit != 0 || len(res.Reached) != 0 {
		t.Fatalf("256 levels: exit %d, reached %v, why %q, %s", res.Exit, res.Reached, res.Why, res.Stderr)
	}
	res = run(t, b, `mkdir -p "$(printf 'd/%.0s' $(seq 257))"`)
	if res.Exit != 0 {
		t.Fatalf("exit %d: %s", res.Exit, res.Stderr)
	}
	if !slices.Contains(res.Reached, LimitDisk) || !slices.Contains(res.Reached, LimitFiles) ||
		!strings.Contains(res.Why, "left a workspace that cannot be counted (its directories nest more than 256 deep), so it is held as past its disk limit of 2048 MiB and its limit of 20000 files") {
		t.Fatalf("reached %v, why %q", res.Reached, res.Why)
	}
	err := b.WriteFile("a.txt", []byte("x"))
	refused(t, "WriteFile a.txt", err, "the workspace cannot be counted (its directories nest more than 256 deep)")
	if strings.Contains(err.Error(), parent) {
		t.Fatalf("the refusal names the host's path: %v", err)
	}
}

// A command in the box that locks a directory it made (chmod 000) stops
// neither the count of the workspace nor its removal: the host gives the
// owner rwx back on the workspace's directories, by descriptor, before it
// counts or removes them. A hub running as root is not stopped by a
// locked directory in the first place, so as root the test runs itself
// again as the unprivileged user nobody, as a hub not run as root would.
func TestLockedDirectoryIsCountedAndRemoved(t *testing.T) {
	if os.Getuid() == 0 {
		rerunAsNobody(t)
		return
	}
	parent := t.TempDir()
	b := openBoxIn(t, Config{Limits: Limits{Files: 5}}, parent, Env(os.Environ(), nil))
	res := run(t, b, `mkdir d && for i in 1 2 3 4 5 6 7 8 9 10; do echo x > d/f$i; done; chmod 000 d && ! ls d 2>/dev/null`)
	if res.Exit != 0 {
		t.Fatalf("the directory was not locked: exit %d, %s", res.Exit, res.Stderr)
	}
	if !slices.Contains(res.Reached, LimitFiles) || !strings.Contains(res.Why, "holding more than its limit of 5 files") {
		t.Fatalf("reached %v, why %q", res.Reached, res.Why)
	}
	err := b.WriteFile("a.txt", []byte("x"))
	refused(t, "WriteFile a.txt", err, "files and directories, its limit; remove some first")
	if strings.Contains(err.Error(), parent) {
		t.Fatalf("the refusal names the host's path: %v", err)
	}
	// A file the box locked is refused to a read in words, naming no
	// host path (the count after each command gives the directories
	// back, never a file).
	run(t, b, `echo hi > r && chmod 000 r`)
	_, err = b.ReadFile("r")
	refused(t, "ReadFile r", err, `"r" cannot be reached: a command in the box took away the permission`)
	if strings.Contains(err.Error(), parent) {
		t.Fatalf("the refusal names the host's path: %v", err)
	}
	// Close removes it (openBoxIn checks at the test's end); Sweep removes
	// a box left behind in the same state.
	left := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other, err := Open(ctx, Config{}, left, Env(os.Environ(), nil))
	if err != nil {
		t.Fatal(err)
	}
	run(t, other, `mkdir -p d/e && echo x > d/e/f && chmod 000 d/e d`)
	if err := Sweep(left); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if entries, err := os.ReadDir(left); err != nil || len(entries) != 0 {
		t.Fatalf("the swept box is still there: %v %v", entries, err)
	}
	_ = other.Close() // its cgroups, if any; its directory is gone
}

// rerunAsNobody runs the calling test again, alone, in a copy of the test
// binary run as the user nobody (65534), and fails with its output if it
// fails there.
func rerunAsNobody(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	// The test's temporary directory and the one above it, the test's
	// own, are the test's user's alone.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
