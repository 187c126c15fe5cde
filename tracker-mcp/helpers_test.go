package tracker

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}

func testDirectory() *authority.Directory {
	return authority.NewDirectory([]authority.Unit{
		{ID: "core", Name: "Core", Lead: "ada", Project: "CORE"},
		{ID: "ops", Name: "Operations", Lead: "grace", Project: "OPS"},
		{ID: "studio", Name: "Studio", Lead: "root"},
	}, []authority.Seat{
		{Handle: "ada", Role: "Tech Lead", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "alan", Role: "Engineer", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "linus", Role: "Engineer", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "grace", Role: "Ops Lead", Kind: authority.SeatHuman, Unit: "ops"},
		{Handle: "bob", Role: "Operator", Kind: authority.SeatAgent, Unit: "ops"},
		{Handle: "zed", Role: "Designer", Kind: authority.SeatAgent, Unit: "studio"},
		{Handle: "root", Role: "Admin", Kind: authority.SeatHuman, Unit: "studio", Admin: true},
	})
}

// Callers of the tests: seats inside a turn, a person, and an unbound
// operator credential.
var (
	alan   = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "turn-1"}
	zed    = authority.Caller{Seat: "zed", Kind: authority.KindAgent, Requester: "root", TurnKey: "turn-z"}
	ada    = authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada", OperatorID: "laptop"}
	grace  = authority.Caller{Seat: "grace", Kind: authority.KindHuman, Requester: "grace", OperatorID: "phone"}
	ciBot  = authority.Caller{Seat: "token:ci", Kind: authority.KindOperator, Requester: "token:ci", OperatorID: "ci"}
	noTurn = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada"}
	turnOf = func(c authority.Caller, turn string) authority.Caller { c.TurnKey = turn; return c }
)

type harness struct {
	*serverstest.Client
	t    testing.TB
	dir  string // the node's data directory
	node *state.Node
	log  *statetest.FaultLog
	ix   *search.Index
}

func newHarness(t testing.TB) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is a tracker whose search ranks by meaning with emb (nil:
// keyword only).
func newHarnessWith(t testing.TB, emb search.Embedder) *harness {
	t.Helper()
	var logger *slog.Logger
	if os.Getenv("TRACKER_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	dir := t.TempDir()
	node, f := statetest.OpenFaulty(t, dir, state.Options{Projectors: Projectors(), Logger: logger})
	ix, err := OpenSearch(context.Background(), node, filepath.Join(dir, "search"), emb, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() }) // before the node's, registered earlier
	h := &harness{t: t, dir: dir, node: node, log: f, ix: ix}
	h.connect(Deps{Node: node, Directory: testDirectory, Logger: logger, Search: ix})
	return h
}

// connect (re)connects the harness's client to a tracker built on d.
func (h *harness) connect(d Deps) {
	h.Client = serverstest.Connect(h.t, func(t servers.Trust) *mcp.Server { return NewServer(d, t) })
}

func (h *harness) raw(c authority.Caller, tool string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	return h.Raw(c, tool, args)
}

func (h *harness) ok(c authority.Caller, tool string, args map[string]any) map[string]any {
	h.t.Helper()
	return h.OK(c, tool, args)
}

func (h *harness) refused(c authority.Caller, tool string, args map[string]any, class authority.Class) serverstest.Refusal {
	h.t.Helper()
	return h.Refused(c, tool, args, class)
}

// drop makes the next n appends lose their acknowledgement.
func (h *harness) drop(n int) { h.log.Set(func(f *statetest.Faults) { f.DropAcks = n }) }

var (
	text        = serverstest.Text
	mustContain = serverstest.MustContain
)

// countItems counts the items the projection holds.
func (h *harness) countItems() int {
	h.t.Helper()
	n := 0
	err := h.node.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kItem), UpperBound: state.Upper(kItem)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		return it.Close()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) wakes() []servers.Wake {
	h.t.Helper()
	w, err := Wakes(h.node, "", 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
