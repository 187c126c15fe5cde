package state

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv names the data directory a re-executed test binary writes
// into until it is killed.
const crashChildEnv = "CREWLET_STATE_CRASH_CHILD_DIR"

// crashChild runs in the child process: four writers write forever and
// print every write answered applied, after the answer.
func crashChild() {
	dir := os.Getenv(crashChildEnv)
	n, err := Open(context.Background(), Options{Dir: dir, Projectors: []Projector{notes{}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("p%d-w%d-%d", os.Getpid(), w, i)
				a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: key, Value: key}))
				if err != nil || a.Outcome != Applied {
					continue
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "applied %s %s %d\n", a.OpID, key, a.Position)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// A node killed (SIGKILL) in the middle of a stream of writes loses none of
// the writes it answered applied: reopened, it reads every one of them and
// its ledger answers each with the same position. Then the projection is
// deleted and rebuilt from the log, with the same result. The same holds
// for a data directory whose log was made before the journal, which the
// first writer's open moves onto it (issue 25: one durability rule).
func TestCrashKeepsEveryAppliedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test re-executes the test binary as a writer and kills it; it runs in every full test run")
	}
	t.Run("journaled", func(t *testing.T) { crashKeepsEveryAppliedWrite(t, t.TempDir(), nil) })
	t.Run("a log made before the journal", func(t *testing.T) {
		dir := t.TempDir()
		// Written through a node whose log is made as before the journal.
		n := openNode(t, dir, func(o *Options) { o.Log = openOldStream(t, filepath.Join(dir, "log")) })
		var before []applied
		for i := range 20 {
			key := fmt.Sprintf("before-%d", i)
			a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: key, Value: key}))
			if err != nil || a.Outcome != Applied {
				t.Fatalf("write %s: %+v %v", key, a, err)
			}
			before = append(before, applied{a.OpID, key, a.Position})
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		crashKeepsEveryAppliedWrite(t, dir, before)
	})
}

// applied is a write a node answered applied.
type applied struct {
	id  OpID
	key string
	pos uint64
}

// crashKeepsEveryAppliedWrite runs writers in a child process on dir,
// kills it mid-burst, twice, and checks that the node reopened on dir
// holds every write answered applied, got among them.
func crashKeepsEveryAppliedWrite(t *testing.T, dir string, got []applied) {
	for round := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		killed := false
		start := len(got)
		deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 || f[0] != "applied" {
				continue
			}
			pos, _ := strconv.ParseUint(f[3], 10, 64)
			got = append(got, applied{OpID(f[1]), f[2], pos})
			if !killed && len(got)-start >= 300 {
				// Mid-stream: other writers are between append and answer.
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		deadline.Stop()
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child stopped after %d writes without being killed", round, len(got)-start)
		}
	}

	check := func(what string) {
		n := openNode(t, dir)
		defer n.Close()
		if jsOf(n).journal == nil {
			t.Fatalf("%s: the log has no journal: its appends are not made durable the one way", what)
		}
		for _, a := range got {
			v, writes, found := readNote(t, n, a.key)
			if !found || v != a.key || writes != 1 {
				t.Fatalf("%s: %s answered applied at %d, now reads %q (found %v, %d writes)", what, a.key, a.pos, v, found, writes)
			}
			ans, ok := n.Vouches(a.id)
			if !ok || ans.Outcome != Applied || ans.Position != a.pos {
				t.Fatalf("%s: ledger answers %+v (%v) for %s, which was answered at %d", what, ans, ok, a.id, a.pos)
			}
		}
		t.Logf("%s: %d applied writes all present, projection at %d", what, len(got), n.Position())
	}
	check("reopened after SIGKILL")
	if err := os.RemoveAll(dir + "/projection"); err != nil {
		t.Fatal(err)
	}
	check("projection rebuilt from the log")
}
