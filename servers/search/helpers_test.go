package search

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}

// The tests' documents: a projector that stores a document whole under
// docPrefix+id and touches it, as a server's projector would.
const (
	testKind  = "test.docs"
	docPrefix = "tdoc/"
	opPutDoc  = "test.doc.put"
)

type docPayload struct {
	Doc
	Delete bool `json:"delete,omitempty"`
}

type docs struct{}

func (docs) Name() string { return opPutDoc }

func (docs) Apply(b *pebble.Batch, _ pebble.Reader, pos uint64, op state.Op) (json.RawMessage, error) {
	var p docPayload
	if err := json.Unmarshal(op.Payload, &p); err != nil {
		return nil, err
	}
	key := []byte(docPrefix + p.ID)
	if p.Delete {
		if err := b.Delete(key, nil); err != nil {
			return nil, err
		}
	} else {
		v, err := json.Marshal(p.Doc)
		if err != nil {
			return nil, err
		}
		if err := b.Set(key, v, nil); err != nil {
			return nil, err
		}
	}
	return nil, Touch(b, pos, testKind, p.ID)
}

func docSource(r pebble.Reader, id string) (Doc, bool, error) {
	v, closer, err := r.Get([]byte(docPrefix + id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Doc{}, false, nil
	}
	if err != nil {
		return Doc{}, false, err
	}
	defer closer.Close()
	var d Doc
	return d, true, json.Unmarshal(v, &d)
}

func docIDs(r pebble.Reader, fn func(string) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(docPrefix), UpperBound: []byte(docPrefix + "\xff")})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(strings.TrimPrefix(string(it.Key()), docPrefix)); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// harness is a node with the documents' projector and an index over it.
type harness struct {
	t    testing.TB
	dir  string
	node *state.Node
	ix   *Index
	emb  Embedder
}

func newHarness(t testing.TB, emb Embedder) *harness {
	t.Helper()
	dir := t.TempDir()
	node, _ := statetest.OpenFaulty(t, dir, state.Options{Projectors: []state.Projector{docs{}}})
	h := &harness{t: t, dir: dir, node: node, emb: emb}
	h.open()
	return h
}

func indexOptions(node *state.Node, dir string, emb Embedder) Options {
	return Options{Kind: testKind, Dir: filepath.Join(dir, "search", testKind), Node: node,
		Source: docSource, IDs: docIDs, Embedder: emb}
}

// open (re)opens the harness's index; it is closed when the test ends.
func (h *harness) open() {
	h.t.Helper()
	ix, err := Open(context.Background(), indexOptions(h.node, h.dir, h.emb))
	if err != nil {
		h.t.Fatal(err)
	}
	h.ix = ix
	h.t.Cleanup(func() { _ = ix.Close() })
}

func (h *harness) write(p docPayload) uint64 {
	h.t.Helper()
	args, _ := json.Marshal(p)
	a, err := h.node.Write(context.Background(), state.Op{Tool: "put_doc", Args: args, Kind: opPutDoc, Payload: args})
	if err != nil || a.Outcome != state.Applied {
		h.t.Fatalf("write %s: %+v %v", p.ID, a, err)
	}
	return a.Position
}

// put writes documents and waits until both indexes reflect them.
func (h *harness) put(ds ...Doc) {
	h.t.Helper()
	var pos uint64
	for _, d := range ds {
		pos = h.write(docPayload{Doc: d})
	}
	h.settle(pos)
}

func (h *harness) remove(id string) {
	h.t.Helper()
	h.settle(h.write(docPayload{Doc: Doc{ID: id}, Delete: true}))
}

// settle waits for the keyword index and the vectors to reach pos.
func (h *harness) settle(pos uint64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.ix.WaitEmbedded(ctx, pos); err != nil {
		h.t.Fatalf("waiting for the index to reach %d: %v", pos, err)
	}
}

func (h *harness) search(q Query) Result {
	h.t.Helper()
	res, err := h.ix.Search(context.Background(), q)
	if err != nil {
		h.t.Fatalf("search %+v: %v", q, err)
	}
	return res
}

func (h *harness) refused(q Query) *authority.Refusal {
	h.t.Helper()
	_, err := h.ix.Search(context.Background(), q)
	r := authority.AsRefusal(err)
	if err == nil || r.Class != authority.Invalid {
		h.t.Fatalf("search %+v: want invalid, got %v", q, err)
	}
	return r
}

func ids(res Result) []string {
	out := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.ID
	}
	return out
}

func sortedIDs(res Result) []string {
	out := ids(res)
	sort.Strings(out)
	return out
}

func mustContain(t testing.TB, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Fatalf("%q does not say %q", s, p)
		}
	}
}

func provider(t testing.TB, maxTokens int) (*searchtest.Provider, Embedder) {
	p := searchtest.NewProvider(t)
	return p, NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, maxTokens)
}

// keywordIDs lists every id the bleve index holds.
func (h *harness) keywordIDs() []string {
	h.t.Helper()
	return indexedIDs(h.t, h.ix)
}

func indexedIDs(t testing.TB, ix *Index) []string {
	t.Helper()
	n, err := ix.bleve.DocCount()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if n == 0 {
		return out
	}
	all, err := ix.bleve.Search(matchAll(int(n)))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all.Hits {
		out = append(out, h.ID)
	}
	sort.Strings(out)
	return out
}

// vectorIDs lists the ids of the kind's vector rows in the node's store,
// checking the in-memory copy holds the same.
func vectorIDs(t testing.TB, node *state.Node, ix *Index) []string {
	t.Helper()
	var out []string
	err := node.View(func(r pebble.Reader) error {
		return scanVecRows(r, testKind, func(id string, _ vecRow) error {
			out = append(out, id)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	if w := meaningOf(ix); w != nil {
		var mem []string
		w.vecs.mu.RLock()
		for id := range w.vecs.rows {
			mem = append(mem, id)
		}
		w.vecs.mu.RUnlock()
		sort.Strings(mem)
		if !slices.Equal(mem, out) {
			t.Fatalf("vectors in memory %v, in the store %v", mem, out)
		}
	}
	return out
}

// projected lists the ids of the documents the projection holds that a
// search may find (not hidden), and of those with text to embed.
func projected(t testing.TB, node *state.Node) (visible []string) {
	t.Helper()
	err := node.View(func(r pebble.Reader) error {
		return docIDs(r, func(id string) error {
			d, ok, err := docSource(r, id)
			if err != nil || !ok || d.Hidden {
				return err
			}
			visible = append(visible, id)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(visible)
	return visible
}

func doc(id, title, body string) Doc { return Doc{ID: id, Title: title, Body: body, Scope: "A"} }

// meaningOf is ix's embedder and its vectors, nil without either.
func meaningOf(ix *Index) *embedWorker {
	if ix == nil {
		return nil
	}
	return ix.meaning.Load()
}
