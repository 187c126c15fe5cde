package artifacts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
)

// crashChildEnv names the data directory a re-executed test binary
// publishes and writes rows into until it is killed.
const crashChildEnv = "CREWLET_ARTIFACTS_CRASH_CHILD_DIR"

func crashNode(dir string) (*state.Node, error) {
	return state.Open(context.Background(), state.Options{Dir: dir, Projectors: append(Projectors(), tracker.Projectors()...)})
}

// crashChild runs in the child: two writers publish versions of their own
// artifacts and two write datastore rows, forever, each printing what was
// answered applied, after the answer.
func crashChild() {
	dir := os.Getenv(crashChildEnv)
	n, err := crashNode(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	s := newSrv(Deps{Node: n, Directory: testDirectory})
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	data, err := s.createArtifact(ctx, ada, createIn{Kind: "sheet", Title: fmt.Sprintf("rows %d", os.Getpid()), Content: "{}"})
	if err == nil {
		_, err = s.setArtifactSchema(ctx, ada, schemaIn{ID: data.ID, Collections: []collection{{Name: "events", Columns: []column{{Name: "v", Type: "string", Indexed: true}}}}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			a, err := s.createArtifact(ctx, ada, createIn{Kind: "html", Title: fmt.Sprintf("site %d-%d", os.Getpid(), w), Content: "v1"})
			if err != nil {
				fmt.Fprintln(os.Stderr, "create:", err)
				return
			}
			head := 1
			for i := 0; ; i++ {
				marker := fmt.Sprintf("p%d-w%d-%d", os.Getpid(), w, i)
				out, err := s.publishArtifact(ctx, ada, publishIn{ID: a.ID, BaseVersion: head, Content: "<p>" + marker + "</p>" + strings.Repeat("x", 4096)})
				if err != nil || out.Outcome != state.Applied {
					// Find the head again, whatever became of that one.
					_ = s.w.View(func(r pebble.Reader) error {
						if art, _ := readArtifact(r, a.ID); art != nil {
							head = art.Head
						}
						return nil
					})
					continue
				}
				head = out.Version
				say("publish %s %d %s", a.ID, out.Version, marker)
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				doc := fmt.Sprintf("p%d-w%d-%d", os.Getpid(), w, i)
				out, err := s.writeArtifactData(ctx, ada, writeDataIn{ID: data.ID, Ops: []opIn{{Op: "set", Collection: "events", Doc: doc, Data: map[string]any{"v": doc}}}})
				if err != nil || out.Outcome != state.Applied {
					continue
				}
				say("row %s %s", data.ID, doc)
			}
		})
	}
	wg.Wait()
}

// A node killed (SIGKILL) in the middle of a stream of publishes and
// datastore writes loses nothing it answered applied, and no version it
// holds points at bytes that are not there whole: every file of every
// version reads back against its digest.
func TestCrashDuringPublishesAndRows(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test re-executes the test binary and kills it; it runs in every full test run")
	}
	dir := t.TempDir()
	type published struct {
		id     string
		ver    int
		marker string
	}
	var pubs []published
	rows := map[string]string{} // doc -> artifact
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
	deadline := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	killed, seen := false, 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "publish":
			var v int
			fmt.Sscan(f[2], &v)
			pubs = append(pubs, published{f[1], v, f[3]})
		case len(f) == 3 && f[0] == "row":
			rows[f[2]] = f[1]
		default:
			continue
		}
		seen++
		if !killed && len(pubs) >= 40 && len(rows) >= 100 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	deadline.Stop()
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the child stopped after %d answers without being killed", seen)
	}

	n, err := crashNode(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := newSrv(Deps{Node: n, Directory: testDirectory})
	ctx := context.Background()
	for _, p := range pubs {
		f, err := s.w.Node().Blob(ctx, mustVersion(t, n, p.id, p.ver).Files["index.html"].Blob, mustVersion(t, n, p.id, p.ver).Files["index.html"].Digest)
		if err != nil || !strings.Contains(string(f), p.marker) {
			t.Fatalf("version %d of %s was answered applied and now reads %v (%d bytes)", p.ver, p.id, err, len(f))
		}
	}
	for doc, id := range rows {
		err := n.View(func(r pebble.Reader) error {
			rw, err := readRow(r, id, "events", doc)
			if err == nil && (rw == nil || rw.Data["v"] != doc) {
				err = fmt.Errorf("row %s answered applied is %+v", doc, rw)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// No version of any artifact points at a blob that is not there whole.
	checked := 0
	err = n.View(func(r pebble.Reader) error {
		return each(r, kVersion, "", func(_, v []byte) (bool, error) {
			var ver version
			if err := json.Unmarshal(v, &ver); err != nil {
				return false, err
			}
			for p, f := range ver.Files {
				if _, err := n.Blob(ctx, f.Blob, f.Digest); err != nil {
					return false, fmt.Errorf("version %d's %s: %w", ver.N, p, err)
				}
				checked++
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d publishes and %d rows answered applied before SIGKILL are all there; %d version files read back whole", len(pubs), len(rows), checked)

}

func mustVersion(t *testing.T, n *state.Node, id string, ver int) *version {
	t.Helper()
	var v *version
	if err := n.View(func(r pebble.Reader) error {
		var err error
		v, err = readVersion(r, id, ver)
		return err
	}); err != nil || v == nil {
		t.Fatalf("version %d of %s: %v (found %v)", ver, id, err, v != nil)
	}
	return v
}
