// Package metrics is a hub node's Prometheus metrics: tool calls by tool,
// source and refusal class with their latency, operator requests by route
// and status, third-party servers' states and restarts, the durable log's
// position and how far the projection trails it, the open operator
// sessions, and the agent runtime's turns, model calls and tokens.
//
// It watches the hub only through the hub's observer seams (a
// hub.CallObserver, a hub.ServerObserver, a hub.RequestObserver), the
// runtime through its own (an agent.Observer), and reads the rest at each
// scrape through Sources, so neither holds Prometheus code and the call
// path pays for a counter and a histogram, nothing more.
//
// A Metrics is safe for concurrent use and starts no goroutine; it keeps
// its own registry, so two hubs in one process (tests) never share series.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Sources are what a scrape reads from the node; a nil one is not
// reported.
type Sources struct {
	// Servers reads every configured MCP server's row.
	Servers func() []hub.ServerState
	// Sessions counts the open operator sessions.
	Sessions func() int
	// Progress reads where the log ends and where the projection is.
	Progress func(ctx context.Context) (logged, projected uint64, err error)
}

// Label values for calls that carry no class of their own.
const (
	// ClassNone marks a call that answered.
	ClassNone = "none"
	// ClassServerError marks a third-party server's own failure, which
	// carries no class (REF-6).
	ClassServerError = "server_error"
	// Unregistered stands for the name of a call to no registered tool:
	// the name is the caller's to choose, and each would be a new series.
	Unregistered = "(unregistered)"
)

// Metrics are one node's metrics.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
	restarts *prometheus.CounterVec
	exits    *prometheus.CounterVec

	turns        *prometheus.CounterVec
	turnTime     *prometheus.HistogramVec
	modelCalls   *prometheus.CounterVec
	modelLatency *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
}

var (
	_ hub.CallObserver    = (*Metrics)(nil)
	_ hub.ServerObserver  = (*Metrics)(nil)
	_ hub.RequestObserver = (*Metrics)(nil)
	_ agent.Observer      = (*Metrics)(nil)
)

// callBuckets span a first-party call (under a millisecond) to a
// third-party one at its default bound (120 s).
var callBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// modelBuckets span a small local model's short answer (a tenth of a
// second) to a call at the runtime's default bound (5 minutes).
var modelBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}

// turnBuckets span a turn that could not run (no model: at once) to a long
// one of many rounds, each up to the model's bound.
var turnBuckets = []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600}

// New builds a node's metrics over its sources.
func New(src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_tool_calls_total",
			Help: "Tool calls routed by the hub, by tool, source (builtin, mcp:<server>) and refusal class (none for a call that answered, server_error for a third-party server's own failure).",
		}, []string{"tool", "source", "class"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "crewlet_tool_call_duration_seconds",
			Help:    "How long the hub took to answer a tool call, refusals included, by tool and source.",
			Buckets: callBuckets,
		}, []string{"tool", "source"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_operator_requests_total",
			Help: "Operator HTTP requests by route pattern and status code; refused credentials answer 401.",
		}, []string{"route", "code"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_mcp_server_restarts_total",
			Help: "Times an MCP server's instance came back up after it was down.",
		}, []string{"server"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_mcp_server_down_total",
			Help: "Times an MCP server's instance went down: it died, or a start failed.",
		}, []string{"server"}),
		// A turn's seat and item are no labels: the series stay as many as
		// the outcomes, and the company's providers and models.
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_agent_turns_total",
			Help: "Agent seats' turns that ended, by outcome (delivered, undelivered, failed, not_run, budget_exhausted).",
		}, []string{"outcome"}),
		turnTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "crewlet_agent_turn_duration_seconds",
			Help:    "How long a turn ran, from its start to its end, by outcome.",
			Buckets: turnBuckets,
		}, []string{"outcome"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_model_calls_total",
			Help: "Model calls sent by turns, their workers and answer_knowledge, by provider and model as the company file names them and outcome (ok, unreachable, timeout, rejected, failed, cut).",
		}, []string{"provider", "model", "outcome"}),
		modelLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "crewlet_model_call_duration_seconds",
			Help:    "How long a model call took to answer or fail, retries included, by provider and model.",
			Buckets: modelBuckets,
		}, []string{"provider", "model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crewlet_model_tokens_total",
			Help: "Tokens model calls spent, by provider, model and direction (input, output); estimated where a server reports none.",
		}, []string{"provider", "model", "direction"}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.requests, m.restarts, m.exits,
		m.turns, m.turnTime, m.modelCalls, m.modelLatency, m.tokens,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&scraped{src: src})
	return m
}

// Registry is where the metrics are registered, for a test or a node that
// adds its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	// A source that cannot be read (a log that is closing) leaves its
	// series out of that scrape; the rest is still served.
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// CallStarted counts the call and times it when it ends.
func (m *Metrics) CallStarted(ctx context.Context, tool string) (context.Context, hub.CallDone) {
	start := time.Now()
	return ctx, func(src hub.Source, res *mcp.CallToolResult) {
		class := ClassNone
		if res != nil && res.IsError {
			class = ClassServerError
			if c, ok := servers.ClassOf(res); ok {
				class = string(c)
			}
		}
		if src == "" && class == "not_found" {
			tool = Unregistered
		}
		m.calls.WithLabelValues(tool, string(src), class).Inc()
		m.latency.WithLabelValues(tool, string(src)).Observe(time.Since(start).Seconds())
	}
}

// ServerStatus counts an instance going down and coming back.
func (m *Metrics) ServerStatus(server, _ string, prev, now upstream.Status) {
	switch {
	case now.State == upstream.StateDown && prev.State != upstream.StateDown:
		m.exits.WithLabelValues(server).Inc()
	case now.State == upstream.StateRunning && prev.State == upstream.StateDown:
		m.restarts.WithLabelValues(server).Inc()
	}
}

// RequestStarted counts the request by the route that served it.
func (m *Metrics) RequestStarted(r *http.Request) (context.Context, func(string, int)) {
	return r.Context(), func(route string, status int) {
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	}
}

// TurnEnded counts a turn's end by its outcome and times it.
func (m *Metrics) TurnEnded(outcome string, took time.Duration) {
	m.turns.WithLabelValues(outcome).Inc()
	m.turnTime.WithLabelValues(outcome).Observe(took.Seconds())
}

// ModelCalled counts a model call, times it and adds what it spent.
func (m *Metrics) ModelCalled(provider, model, outcome string, took time.Duration, input, output int64) {
	m.modelCalls.WithLabelValues(provider, model, outcome).Inc()
	m.modelLatency.WithLabelValues(provider, model).Observe(took.Seconds())
	if input > 0 {
		m.tokens.WithLabelValues(provider, model, "input").Add(float64(input))
	}
	if output > 0 {
		m.tokens.WithLabelValues(provider, model, "output").Add(float64(output))
	}
}

// StateLabel is a row state as a label value: Partly failing is
// partly_failing.
func StateLabel(state string) string {
	return strings.ReplaceAll(strings.ToLower(state), " ", "_")
}
