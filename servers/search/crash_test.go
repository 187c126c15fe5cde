package search

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/state"
)

// crashChildEnv names the data directory a re-executed test binary writes
// documents into, with an index open, until it is killed.
const crashChildEnv = "CREWLET_SEARCH_CRASH_CHILD_DIR"

// words the child's documents are made of: concept words the test
// provider embeds, and plain ones.
var crashWords = []string{"car", "invoice", "postgres", "soup", "storm", "router", "kitten", "report", "meeting", "draft", "budget", "plan"}

// crashChild runs in the child process: it opens the node and an index
// with an embedder on its own provider, then four writers create, edit,
// hide and delete documents forever, printing each write answered applied.
func crashChild() {
	dir := os.Getenv(crashChildEnv)
	ctx := context.Background()
	node, err := state.Open(ctx, state.Options{Dir: dir, Projectors: []state.Projector{docs{}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open node:", err)
		os.Exit(2)
	}
	p := searchtest.Start()
	ix, err := Open(ctx, indexOptions(node, dir, NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open index:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stdout, "opened rebuilt=%v\n", ix.rebuilt)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i%40)
				d := Doc{ID: id, Scope: fmt.Sprintf("S%d", i%3),
					Title: fmt.Sprintf("%s %s %d", crashWords[(i+w)%len(crashWords)], crashWords[(3*i)%len(crashWords)], os.Getpid()),
					Body:  strings.Repeat(crashWords[(i*7+w)%len(crashWords)]+" words here. ", 1+i%5),
				}
				p := docPayload{Doc: d}
				switch {
				case i%11 == 10:
					p.Delete = true
				case i%7 == 6:
					p.Hidden = true
				}
				args := fmt.Appendf(nil, `{"w":%d,"i":%d,"pid":%d}`, w, i, os.Getpid())
				payload, _ := json.Marshal(p)
				a, err := node.Write(ctx, state.Op{Tool: "put_doc", Args: args, Kind: opPutDoc, Payload: payload})
				if err != nil || a.Outcome != state.Applied {
					continue
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "applied %d\n", a.Position)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// An index killed (SIGKILL) in the middle of a stream of document writes
// is consistent when it is opened again: the keyword index resumes from
// the position bleve durably held (no rebuild) and then holds exactly the
// documents the projection holds, with their current text; the vectors
// are exactly those of the visible documents, each of its current text.
// Twice, then once more with the index directory deleted, which rebuilds
// it.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test re-executes the test binary as a writer and kills it; it runs in every full test run")
	}
	dir := t.TempDir()
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
		applied, killed := 0, false
		deadline := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "opened ") && round > 0 && line != "opened rebuilt=false" {
				t.Errorf("round %d: the index was rebuilt after a kill instead of resuming: %s", round, line)
			}
			if !strings.HasPrefix(line, "applied ") {
				continue
			}
			applied++
			if !killed && applied >= 400 {
				// Mid-stream: writers are between append and answer, and
				// the indexer and the embedder are mid-batch.
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		deadline.Stop()
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child stopped after %d writes without being killed", round, applied)
		}
		checkConsistent(t, dir, fmt.Sprintf("round %d, reopened after SIGKILL", round), false)
	}
	if err := os.RemoveAll(indexOptions(nil, dir, nil).Dir); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, dir, "index directory deleted", true)
}

// checkConsistent opens the node and its index and checks both indexes
// against the projection.
func checkConsistent(t *testing.T, dir, what string, wantRebuilt bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := state.Open(ctx, state.Options{Dir: dir, Projectors: []state.Projector{docs{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	p := searchtest.NewProvider(t)
	emb := NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192)
	ix, err := Open(ctx, indexOptions(node, dir, emb))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.rebuilt != wantRebuilt {
		t.Fatalf("%s: rebuilt %v, want %v", what, ix.rebuilt, wantRebuilt)
	}
	resumed := ix.Through()
	if err := ix.WaitEmbedded(ctx, node.Position()); err != nil {
		t.Fatal(err)
	}
	visible := projected(t, node)
	if len(visible) == 0 {
		t.Fatalf("%s: the projection holds no document", what)
	}
	if got := indexedIDs(t, ix); !slices.Equal(got, visible) {
		t.Fatalf("%s: keyword index holds %v\nprojection shows %v", what, got, visible)
	}
	if got := vectorIDs(t, node, ix); !slices.Equal(got, visible) {
		t.Fatalf("%s: vectors of %v\nprojection shows %v", what, got, visible)
	}
	// Each indexed text and each vector is of the document as it is now.
	req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), len(visible), 0, false)
	req.Fields = []string{"title", "body"}
	all, err := ix.bleve.Search(req)
	if err != nil {
		t.Fatal(err)
	}
	err = node.View(func(r pebble.Reader) error {
		for _, h := range all.Hits {
			d, _, err := docSource(r, h.ID)
			if err != nil {
				return err
			}
			if h.Fields["title"] != d.Title || h.Fields["body"] != d.Body {
				return fmt.Errorf("%s: keyword index holds %q / %q for %s, the projection %q / %q", what, h.Fields["title"], h.Fields["body"], h.ID, d.Title, d.Body)
			}
			row, _ := ix.meaning.Load().vecs.get(h.ID)
			if row.digest != textDigest(searchtest.Model, opening(docText(d), emb.MaxInputBytes())) || row.scope != d.Scope {
				return fmt.Errorf("%s: the vector of %s is not of its current text and scope", what, h.ID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: index resumed at %d, projection at %d; %d documents, keyword and vectors match", what, resumed, node.Position(), len(visible))
}
