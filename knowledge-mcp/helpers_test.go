package knowledge

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// bleve, which the search index links, starts goroutines of its own that
// live for the process.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, searchtest.LeakOptions()...) }

func testDirectory() *authority.Directory {
	return authority.NewDirectory([]authority.Unit{
		{ID: "core", Name: "Core", Lead: "ada", Project: "CORE", Space: "CORE"},
		{ID: "ops", Name: "Operations", Lead: "grace", Project: "OPS", Space: "OPS"},
		{ID: "studio", Name: "Studio", Lead: "root"},
	}, []authority.Seat{
		{Handle: "ada", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "alan", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "grace", Kind: authority.SeatHuman, Unit: "ops"},
		{Handle: "zed", Kind: authority.SeatAgent, Unit: "studio"},
	})
}

var (
	alan  = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "turn-1"}
	ada   = authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada", OperatorID: "laptop"}
	grace = authority.Caller{Seat: "grace", Kind: authority.KindHuman, Requester: "grace", OperatorID: "phone"}
	zed   = authority.Caller{Seat: "zed", Kind: authority.KindAgent, Requester: "root", TurnKey: "turn-z"}
)

type harness struct {
	*serverstest.Client
	t    testing.TB
	node *state.Node
	log  *statetest.FaultLog
	ix   *search.Index
}

func newHarness(t testing.TB) *harness { return newHarnessWith(t, nil) }

// newHarnessWith runs the knowledge base with its search index, ranking by
// meaning through emb when it is not nil.
func newHarnessWith(t testing.TB, emb search.Embedder) *harness {
	t.Helper()
	dir := t.TempDir()
	node, f := statetest.OpenFaulty(t, dir, state.Options{Projectors: Projectors()})
	ix, err := OpenSearch(context.Background(), node, filepath.Join(dir, "search"), emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	h := &harness{t: t, node: node, log: f, ix: ix}
	h.Client = serverstest.Connect(t, func(tr servers.Trust) *mcp.Server {
		return NewServer(Deps{Node: node, Directory: testDirectory, Search: ix}, tr)
	})
	return h
}

// write files a page and answers its id.
func (h *harness) write(c authority.Caller, args map[string]any) string {
	h.t.Helper()
	return h.OK(c, "write_page", args)["id"].(string)
}

// page reads a page through get_page.
func (h *harness) page(id string) map[string]any {
	h.t.Helper()
	return h.OK(ada, "get_page", map[string]any{"id": id})["page"].(map[string]any)
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func refIDs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, r := range list {
		out = append(out, r.(map[string]any)["id"].(string))
	}
	return out
}

var mustContain = serverstest.MustContain

// wakes reads the knowledge base's wake rows, oldest first.
func wakes(t testing.TB, h *harness) []servers.Wake {
	t.Helper()
	w, err := Wakes(h.node, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// stateOp is an operation written straight to the node as ada.
func stateOp(kind string, payload any) state.Op {
	b, _ := json.Marshal(payload)
	return state.Op{Tool: "test", Args: b, Kind: kind, Payload: b, Caller: ada}
}
