package artifacts

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/crewlet/hub/servers/search/searchtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
	"github.com/crewlet/hub/tracker-mcp"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	// bleve, linked through the tracker's files, starts goroutines of its
	// own that live for the process.
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}

func testDirectory() *authority.Directory {
	return authority.NewDirectory([]authority.Unit{
		{ID: "core", Name: "Core", Lead: "ada", Project: "CORE", Space: "CORE"},
		{ID: "web", Name: "Web", Lead: "ada", Parent: "core"},
		{ID: "ops", Name: "Operations", Lead: "grace", Project: "OPS"},
	}, []authority.Seat{
		{Handle: "ada", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "bob", Kind: authority.SeatHuman, Unit: "web"},
		{Handle: "grace", Kind: authority.SeatHuman, Unit: "ops"},
		{Handle: "root", Kind: authority.SeatHuman, Unit: "ops", Admin: true},
		{Handle: "alan", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "zed", Kind: authority.SeatAgent, Unit: "ops"},
	})
}

// Callers: people on the operator surface act for themselves; a seat's
// call belongs to a turn and acts for whoever woke it.
var (
	ada   = authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada", OperatorID: "laptop"}
	bob   = authority.Caller{Seat: "bob", Kind: authority.KindHuman, Requester: "bob", OperatorID: "bob-laptop"}
	grace = authority.Caller{Seat: "grace", Kind: authority.KindHuman, Requester: "grace", OperatorID: "phone"}
	root  = authority.Caller{Seat: "root", Kind: authority.KindHuman, Requester: "root", OperatorID: "root-laptop"}
	// alan acts for ada, zed for grace.
	alan = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "turn-a1"}
	zed  = authority.Caller{Seat: "zed", Kind: authority.KindAgent, Requester: "grace", TurnKey: "turn-z1"}
)

// turn is c in another turn, acting for requester.
func turn(c authority.Caller, key, requester string) authority.Caller {
	c.TurnKey, c.Requester = key, requester
	return c
}

type harness struct {
	*serverstest.Client
	t            testing.TB
	dir          string
	node         *state.Node
	log          *statetest.FaultLog
	manageOthers bool
	store        *Store
}

type sourcesStub struct{}

func (sourcesStub) List(_ context.Context, viewer authority.Caller) ([]Source, error) {
	all := []Source{{Name: "deploys", Columns: []SourceColumn{{Name: "at", Type: "time"}}, ReadableBy: "every seat", Refresh: "on view"}}
	if viewer.Seat == "ada" || viewer.Seat == "alan" {
		all = append(all, Source{Name: "core_costs", Parameters: []SourceParam{{Name: "month", Type: "string", Required: true}},
			Columns: []SourceColumn{{Name: "cost", Type: "number"}}, ReadableBy: "unit:core", Refresh: "hourly"})
	}
	return all, nil
}

func newHarness(t testing.TB, opts ...func(*state.Options, *Deps)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir()}
	so := state.Options{Projectors: append(append(Projectors(), tracker.Projectors()...), testQuota)}
	deps := Deps{Directory: testDirectory, ManageOthers: func() bool { return h.manageOthers },
		BaseURL: func() string { return "http://hub.test" }, Sources: sourcesStub{}}
	for _, o := range opts {
		o(&so, &deps)
	}
	h.node, h.log = statetest.OpenFaulty(t, h.dir, so)
	deps.Node = h.node
	h.store = NewStore(deps)
	h.Client = serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return NewServer(deps, tr) })
	return h
}

// tracker is a tracker server on the harness's node, for project files.
func (h *harness) tracker() *serverstest.Client {
	return serverstest.Connect(h.t, func(tr servers.Trust) *mcp.Server {
		return tracker.NewServer(tracker.Deps{Node: h.node, Directory: testDirectory}, tr)
	})
}

// create makes an html artifact as c and answers its id.
func (h *harness) create(c authority.Caller, title, content string) string {
	h.t.Helper()
	out := h.OK(c, "create_artifact", map[string]any{"kind": "html", "title": title, "content": content})
	return out["id"].(string)
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var mustContain = serverstest.MustContain

func textOf(res *mcp.CallToolResult) string { return serverstest.Text(res) }

const kindTestQuota = "artifacts.test.quota"

// testQuota is a projector only tests register: it sets a turn's quota.
var testQuota = servers.Projector(kindTestQuota, func(a *servers.Apply) (any, error) {
	var pl struct {
		Turn  string    `json:"turn"`
		Quota turnQuota `json:"quota"`
	}
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	return map[string]any{}, state.SetJSON(a.B, kQuota+pl.Turn, pl.Quota)
})

// setQuota sets a turn's quota row straight in the projection, as if the
// turn had already written that much.
func setQuota(t testing.TB, h *harness, turn string, q turnQuota) {
	t.Helper()
	op := state.Op{Tool: "test_quota", Args: mustJSON(turn), Kind: kindTestQuota, Payload: mustJSON(map[string]any{"turn": turn, "quota": q}),
		Caller: ada}
	if _, err := h.node.Write(context.Background(), op); err != nil {
		t.Fatal(err)
	}
}
