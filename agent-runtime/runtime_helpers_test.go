package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The turn loop's tests run real turns against a fake model server on
// loopback and a real state node; the hub's side is a recording surface
// (the hub's own tests and the serve package's run it against the real
// router).

type recordedCall struct {
	Caller authority.Caller
	Name   string
	Args   string
}

type fakeSurface struct {
	tools []Tool
	mu    sync.Mutex
	calls []recordedCall
}

func (s *fakeSurface) Tools() []Tool { return s.tools }

func (s *fakeSurface) Call(_ context.Context, c authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	s.mu.Lock()
	s.calls = append(s.calls, recordedCall{c, name, string(args)})
	s.mu.Unlock()
	for _, t := range s.tools {
		if t.Name == name {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + name}}}
		}
	}
	return servers.Refused(authority.Refuse(authority.NotFound, "No tool called %q is registered.", name))
}

func (s *fakeSurface) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		out = append(out, c.Name)
	}
	return out
}

type fakeHub struct {
	surface *fakeSurface
	mu      sync.Mutex
	claimed map[string]int
}

func (h *fakeHub) Surface(string) Surface { return h.surface }
func (h *fakeHub) ClaimSeat(_ context.Context, seat string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claimed[seat]++
	return nil
}
func (h *fakeHub) ReleaseSeat(_ context.Context, seat string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claimed[seat]--
	return nil
}

// Tools the loop decides on, by their hints and delivery.
var (
	searchTool  = Tool{Name: "search_knowledge", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.Yes}}
	commentTool = Tool{Name: "comment_on_work_item", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.No}, Delivers: "tracker"}
	// An MCP tool whose server advertised no hints.
	unannotated = Tool{Name: "tavily_search", Source: "mcp:tavily", Delivers: "mcp:tavily"}
	diaryTool   = Tool{Name: "reflect_and_persist", Source: "builtin", Hints: servers.Hints{ReadOnly: servers.No}}
)

type harness struct {
	t     *testing.T
	rt    *Runtime
	hub   *fakeHub
	model *modeltest.Server
	store *Store
	feed  Feed
	n     int
}

func newHarness(t *testing.T, script modeltest.Script, tools []Tool, opts func(*Options)) *harness {
	t.Helper()
	model := modeltest.Start(t, script)
	store := NewStore(testNode(t))
	hub := &fakeHub{surface: &fakeSurface{tools: tools}, claimed: map[string]int{}}
	o := Options{
		Store: store, Hub: hub,
		Seat: func(seat string) (SeatSpec, bool, error) {
			return SeatSpec{Model: ModelSpec{API: "openai", Provider: "fake", BaseURL: model.OpenAIBase(), Model: "m"}, Instructions: "Be brief."}, true, nil
		},
		Directory: func() *authority.Directory { return testDirectory() },
	}
	if opts != nil {
		opts(&o)
	}
	rt, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	feed := Feed{Name: "test", Trigger: func(w servers.Wake) (Trigger, error) {
		return Trigger{Text: "@alan please look at " + w.Subject, Author: servers.Author{Seat: w.By, Kind: authority.KindHuman}, About: "a comment on " + w.Subject}, nil
	}}
	return &harness{t: t, rt: rt, hub: hub, model: model, store: store, feed: feed}
}

// turn runs one turn of seat alan woken by ada, to its end, and answers
// its record.
func (h *harness) turn() TurnRecord {
	h.t.Helper()
	h.n++
	w := servers.Wake{Cursor: strings.Repeat("0", 15) + string(rune('0'+h.n)) + "/0001", Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()}
	rec, err := h.rt.begin(h.t.Context(), h.feed, w)
	if err != nil {
		h.t.Fatal(err)
	}
	h.rt.runTurn(h.t.Context(), rec)
	got, found, err := h.store.Turn(rec.Key)
	if err != nil || !found || got.Running() {
		h.t.Fatalf("turn %s: %+v %v %v", rec.Key, got, found, err)
	}
	return got
}

func isWorker(c modeltest.Conversation) bool {
	return strings.HasPrefix(c.System, "You are a short-lived worker")
}
