package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openBox opens a real box under the test's temporary directory with
// cfg, closed at the test's end.
func openBox(t *testing.T, cfg Config) *Box {
	t.Helper()
	return openBoxIn(t, cfg, t.TempDir(), Env(os.Environ(), nil))
}

// openBoxIn opens a real box under parent with env, closed at the test's
// end, when nothing of it may be left: its workspace nor its cgroups.
func openBoxIn(t *testing.T, cfg Config, parent string, env []string) *Box {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Open(ctx, cfg, parent, env)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, d := range []string{filepath.Dir(b.Dir()), b.cg.pids, b.cg.memory} {
			if _, err := os.Stat(d); d != "" && !os.IsNotExist(err) {
				t.Errorf("%s outlived Close: %v", d, err)
			}
		}
	})
	return b
}

func run(t *testing.T, b *Box, script string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := b.Run(ctx, []string{"sh", "-c", script}, nil)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return res
}

// A script written into the workspace runs there, its output comes back,
// a listing through the box names it, and its commit is delivered.
func TestBoxWritesRunsListsAndDelivers(t *testing.T) {
	b := openBox(t, Config{})
	script := []byte("#!/bin/sh\necho hello from the box\n")
	if err := b.WriteFile("bin/hello.sh", script); err != nil {
		t.Fatal(err)
	}
	res := run(t, b, "sh bin/hello.sh && pwd && git add -A && git commit -q -m 'add hello'")
	if res.Exit != 0 || res.Transcript != "hello from the box\n"+Workspace+"\n" {
		t.Fatalf("exit %d, transcript %q, stderr %q", res.Exit, res.Transcript, res.Stderr)
	}
	entries, err := b.List(context.Background(), "bin")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0] != (Entry{Path: "bin/hello.sh", Type: "file", Size: int64(len(script))}) {
		t.Fatalf("listing: %+v", entries)
	}
	refs, err := b.Commits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs.Refs) != 1 || !strings.HasSuffix(refs.Refs[0], " add hello") {
		t.Fatalf("refs: %+v", refs)
	}
	got, err := b.ReadFile("/workspace/bin/hello.sh")
	if err != nil || !strings.Contains(string(got), "hello from the box") {
		t.Fatalf("read back: %q %v", got, err)
	}
	dir := b.Dir()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Fatalf("the workspace outlived Close: %v", err)
	}
}

// Close stops a run in flight and everything it started, and is safe
// twice.
func TestCloseStopsARunInFlight(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, Config{}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile("fifo-wait.sh", []byte("mkfifo f && echo started && exec cat f\n")); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := b.run(ctx, []string{"sh", "fifo-wait.sh"}, nil, runOptions{raw: writerFunc(func(p []byte) {
			if strings.Contains(string(p), "started") {
				close(started)
			}
		})})
		done <- err
	}()
	<-started
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the box was removed") {
		t.Fatalf("the run ended %v, want the box removed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := b.Run(ctx, []string{"true"}, nil); err == nil {
		t.Fatal("a closed box ran a command")
	}
}

// A box left by a hub that ended without closing it is removed by the next
// start's Sweep: its workspace and its cgroups.
func TestSweepRemovesBoxesLeftBehind(t *testing.T) {
	parent := t.TempDir()
	b, err := Open(context.Background(), Config{}, parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	left := []string{filepath.Dir(b.Dir())}
	for _, d := range []string{b.cg.pids, b.cg.memory} {
		if d != "" {
			left = append(left, d)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, "not-a-box"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Sweep(parent); err != nil {
		t.Fatal(err)
	}
	for _, d := range left {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s outlived the sweep: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "not-a-box")); err != nil {
		t.Fatalf("the sweep removed what is not a box: %v", err)
	}
}
