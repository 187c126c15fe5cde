package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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

// faultLog wraps the real log and drops acknowledgements on request: the
// append lands, the caller hears an error, as when a connection dies after
// the server stored the entry.
type faultLog struct {
	state.Log
	mu       sync.Mutex
	dropAcks int
	// skip lets this many appends through before dropAfterSkip more lose
	// their acknowledgement.
	skip, dropAfterSkip int
	// hide: the next append lands, its acknowledgement is lost, and this
	// node's follower never sees it — as a node that adopted a snapshot
	// past it would not — so the ledger cannot vouch for what came before.
	hide   int
	hidden map[uint64]bool
}

func (f *faultLog) Follow(ctx context.Context, from uint64, deliver func(state.Entry) error) error {
	return f.Log.Follow(ctx, from, func(e state.Entry) error {
		f.mu.Lock()
		skip := f.hidden[e.Position]
		f.mu.Unlock()
		if skip {
			return nil
		}
		return deliver(e)
	})
}

func (f *faultLog) Append(ctx context.Context, msgs []state.Message) ([]uint64, error) {
	f.mu.Lock()
	drop := f.dropAcks > 0
	if drop {
		f.dropAcks--
	}
	if !drop && f.skip > 0 {
		f.skip--
		if f.skip == 0 {
			f.dropAcks, f.dropAfterSkip = f.dropAfterSkip, 0
		}
	}
	hide := f.hide > 0
	if hide {
		f.hide--
		drop = true
		// Held until the entry is marked hidden, so the follower cannot
		// deliver it first.
		defer f.mu.Unlock()
	} else {
		f.mu.Unlock()
	}
	pos, err := f.Log.Append(ctx, msgs)
	if hide && err == nil {
		if f.hidden == nil {
			f.hidden = map[uint64]bool{}
		}
		for _, p := range pos {
			f.hidden[p] = true
		}
	}
	if drop && err == nil {
		return nil, errors.New("injected: acknowledgement lost")
	}
	return pos, err
}

func (f *faultLog) drop(n int) {
	f.mu.Lock()
	f.dropAcks = n
	f.mu.Unlock()
}

type harness struct {
	t     testing.TB
	node  *state.Node
	log   *faultLog
	cs    *mcp.ClientSession
	proof string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	js, err := state.OpenJetStream(ctx, dir+"/log")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultLog{Log: js}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var logger *slog.Logger
	if os.Getenv("TRACKER_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	node, err := state.Open(octx, state.Options{Dir: dir, Projectors: Projectors(), Log: f, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	h := &harness{t: t, node: node, log: f}
	h.connect(Deps{Node: node, Directory: testDirectory, Logger: logger})
	return h
}

func (h *harness) connect(d Deps) {
	trust, proof := servers.InProcessTrust()
	s := NewServer(d, trust)
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close(); ss.Wait() })
	h.cs, h.proof = cs, proof
}

func (h *harness) raw(c authority.Caller, tool string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: servers.CallerMeta(c, h.proof)})
	if err != nil {
		h.t.Fatalf("%s: CallTool: %v", tool, err)
	}
	return res
}

// ok calls a tool that must succeed and answers its output as a map.
func (h *harness) ok(c authority.Caller, tool string, args map[string]any) map[string]any {
	h.t.Helper()
	res := h.raw(c, tool, args)
	if res.IsError {
		h.t.Fatalf("%s(%v) refused: %s", tool, args, text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		h.t.Fatalf("%s: output %s: %v", tool, b, err)
	}
	return out
}

type refusal struct {
	Class    authority.Class `json:"class"`
	Sentence string          `json:"sentence"`
	Data     map[string]any  `json:"data"`
}

// refused calls a tool that must be refused with class.
func (h *harness) refused(c authority.Caller, tool string, args map[string]any, class authority.Class) refusal {
	h.t.Helper()
	res := h.raw(c, tool, args)
	got, ok := servers.ClassOf(res)
	if !ok || got != class {
		h.t.Fatalf("%s(%v): class %q (refused %v), want %q: %s", tool, args, got, ok, class, text(res))
	}
	var r refusal
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &r)
	return r
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func mustContain(t testing.TB, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}

// countItems counts the items the projection holds.
func (h *harness) countItems() int {
	h.t.Helper()
	n := 0
	err := h.node.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kItem), UpperBound: []byte("trk/item0")})
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

func (h *harness) wakes() []wake {
	h.t.Helper()
	var out []wake
	err := h.node.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kWake), UpperBound: []byte("trk/wake0")})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			var w wake
			if err := json.Unmarshal(it.Value(), &w); err != nil {
				return err
			}
			out = append(out, w)
		}
		return it.Close()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
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
