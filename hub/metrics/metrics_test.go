package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/search/searchtest"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/metrics"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, searchtest.LeakOptions()...) }

const token = "metrics-test-token-1"

// node is a hub with the echo first-party server and one HTTP upstream,
// its metrics wired through the seams as a node wires them.
type node struct {
	hub *hub.Hub
	m   *metrics.Metrics
	url string
}

func newNode(t *testing.T) *node {
	t.Helper()
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	company := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf("{name: up, url: %q}", up)).Parse(t)
	n := &node{}
	n.m = metrics.New(metrics.Sources{
		Servers:  func() []hub.ServerState { return n.hub.ServerStates() },
		Sessions: func() int { return n.hub.OperatorSessions() },
		Progress: func(context.Context) (uint64, uint64, error) { return 10, 7, nil },
	})
	h, err := hub.New(context.Background(), hub.Options{
		Company:    company,
		Env:        hubtest.NewEnv(map[string]string{"ADA_TOKEN": token}).Lookup,
		FirstParty: []hub.FirstParty{{Name: "echo", New: func(tr servers.Trust, _ hub.Deps) *mcp.Server { return hubtest.EchoServer(tr) }}},
		Observers:  hub.Observers{Calls: n.m, Servers: n.m},
		Metrics:    n.m.Handler(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.hub = h
	srv := httptest.NewServer(hub.ObserveRequests(h.Handler(), n.m))
	t.Cleanup(func() { h.Close(); srv.Close() })
	n.url = srv.URL
	return n
}

// scrape reads /metrics as Prometheus would, through the text parser.
func (n *node) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := hubtest.Client(token).Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// value is the counter, gauge or histogram count of the series with
// exactly these labels; 0 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// The counters move with calls and refusals: each call is counted once by
// tool, source and class and timed; a name nothing registered is counted
// under one label, not its own; a refused credential is counted by route
// and 401; the server's state, the sessions and the log's progress are
// read at the scrape.
func TestCountersMoveWithCallsAndRefusals(t *testing.T) {
	n := newNode(t)
	before := n.scrape(t)
	if v := value(before, "crewlet_tool_calls_total", "tool", "echo", "source", "builtin", "class", "none"); v != 0 {
		t.Fatalf("calls before any call: %v", v)
	}
	cs := hubtest.Connect(t, n.url+"/operator/mcp", token, "2025-11-25")
	call := func(name string, args map[string]any) {
		t.Helper()
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}
	call("echo", map[string]any{"text": "a"})
	call("echo", map[string]any{"text": "b"})
	call("echo", map[string]any{"text": "c", "refuse": "conflict"})
	call("echo_up", map[string]any{})
	call("made_up_name_1", map[string]any{})
	call("made_up_name_2", map[string]any{})
	resp, err := hubtest.Client("wrong-token").Get(n.url + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %s", resp.Status)
	}

	got := n.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"crewlet_tool_calls_total", []string{"tool", "echo", "source", "builtin", "class", "none"}, 2},
		{"crewlet_tool_calls_total", []string{"tool", "echo", "source", "builtin", "class", "conflict"}, 1},
		{"crewlet_tool_calls_total", []string{"tool", "echo_up", "source", "mcp:up", "class", "none"}, 1},
		{"crewlet_tool_calls_total", []string{"tool", metrics.Unregistered, "source", "", "class", "not_found"}, 2},
		{"crewlet_tool_call_duration_seconds", []string{"tool", "echo", "source", "builtin"}, 3},
		{"crewlet_mcp_server_state", []string{"server", "up", "state", "running"}, 1},
		{"crewlet_mcp_server_state", []string{"server", "up", "state", "failing"}, 0},
		{"crewlet_mcp_server_tools", []string{"server", "up"}, 1},
		{"crewlet_operator_sessions", nil, 1},
		{"crewlet_log_position", nil, 10},
		{"crewlet_projection_position", nil, 7},
		{"crewlet_projection_lag_entries", nil, 3},
	} {
		if v := value(got, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// A request is counted once its handler has returned, which can be
	// just after its client read the answer.
	deadline := time.Now().Add(5 * time.Second)
	for {
		refused := value(got, "crewlet_operator_requests_total", "route", "GET /tools", "code", "401")
		mcpOK := value(got, "crewlet_operator_requests_total", "route", "/operator/mcp", "code", "200")
		if refused == 1 && mcpOK >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests counted: %v refused (want 1), %v MCP (want at least the 6 calls)", refused, mcpOK)
		}
		time.Sleep(10 * time.Millisecond)
		got = n.scrape(t)
	}
	// The caller's made-up names are not series of their own.
	for _, m := range got["crewlet_tool_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.HasPrefix(l.GetValue(), "made_up_name") {
				t.Fatalf("a made-up tool name became a label: %v", m)
			}
		}
	}
	// Without the token there is nothing to read.
	resp, err = http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("metrics without a token: %s", resp.Status)
	}
}

// An instance going down and coming back is counted once each way; a
// first start is neither.
func TestRestartsCounted(t *testing.T) {
	m := metrics.New(metrics.Sources{})
	st := func(s upstream.State) upstream.Status { return upstream.Status{State: s} }
	m.ServerStatus("up", "", st(upstream.StateStarting), st(upstream.StateRunning))
	m.ServerStatus("up", "", st(upstream.StateRunning), st(upstream.StateDown))
	// A failed restart keeps it down, with a new cause.
	m.ServerStatus("up", "", upstream.Status{State: upstream.StateDown, Cause: "a"}, upstream.Status{State: upstream.StateDown, Cause: "b"})
	m.ServerStatus("up", "", st(upstream.StateDown), st(upstream.StateRunning))
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if v := value(byName, "crewlet_mcp_server_restarts_total", "server", "up"); v != 1 {
		t.Errorf("restarts %v, want 1", v)
	}
	if v := value(byName, "crewlet_mcp_server_down_total", "server", "up"); v != 1 {
		t.Errorf("downs %v, want 1", v)
	}
}

// The runtime's turns and model calls are counted as it tells them, and
// scraped over HTTP like the rest: turns by outcome and timed, model calls
// by provider, model and outcome and timed, tokens by direction. A failed
// call spent nothing, so it adds no tokens.
func TestTurnsAndModelCallsCounted(t *testing.T) {
	n := newNode(t)
	n.m.ModelCalled("local", "qwen3:8b", agent.ModelCallOK, 2*time.Second, 1200, 40)
	n.m.ModelCalled("local", "qwen3:8b", agent.ModelCallOK, time.Second, 1300, 60)
	n.m.ModelCalled("local", "qwen3:8b", agent.ModelCallUnreachable, time.Millisecond, 0, 0)
	n.m.ModelCalled("claude", "sonnet", agent.ModelCallRejected, time.Second, 0, 0)
	n.m.TurnEnded(agent.Delivered, 3*time.Second)
	n.m.TurnEnded(agent.Failed, time.Millisecond)
	n.m.TurnEnded(agent.Failed, time.Millisecond)
	got := n.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"crewlet_agent_turns_total", []string{"outcome", "delivered"}, 1},
		{"crewlet_agent_turns_total", []string{"outcome", "failed"}, 2},
		{"crewlet_agent_turn_duration_seconds", []string{"outcome", "failed"}, 2},
		{"crewlet_model_calls_total", []string{"provider", "local", "model", "qwen3:8b", "outcome", "ok"}, 2},
		{"crewlet_model_calls_total", []string{"provider", "local", "model", "qwen3:8b", "outcome", "unreachable"}, 1},
		{"crewlet_model_calls_total", []string{"provider", "claude", "model", "sonnet", "outcome", "rejected"}, 1},
		{"crewlet_model_call_duration_seconds", []string{"provider", "local", "model", "qwen3:8b"}, 3},
		{"crewlet_model_tokens_total", []string{"provider", "local", "model", "qwen3:8b", "direction", "input"}, 2500},
		{"crewlet_model_tokens_total", []string{"provider", "local", "model", "qwen3:8b", "direction", "output"}, 100},
		{"crewlet_model_tokens_total", []string{"provider", "claude", "model", "sonnet", "direction", "input"}, 0},
	} {
		if v := value(got, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}
