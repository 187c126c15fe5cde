package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// scrapeMetrics reads a /metrics answer through Prometheus's own text
// parser; token "" sends none.
func scrapeMetrics(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// series is the value of the series of a family with these labels (a
// histogram's count); 0 when there is none.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range fams[name].GetMetric() {
		match := len(m.GetLabel()) == len(labels)
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
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

// /metrics of the built binary, behind the token on the operator listener
// and without one on --metrics-listen: the call counters move with calls
// and refusals, refused credentials are counted, a killed child's restart
// is counted, and the states and log gauges are there.
func TestMetricsOfTheBuiltHub(t *testing.T) {
	bin := buildEverythingServer(t)
	cfg := companyWith(t, fmt.Sprintf(`  - name: everything
    command: %q
    env: {WHO: metrics-everything}
  - name: ghost
    command: /nonexistent/bin/mcp-ghost
`, bin))
	h := startHub(t, []string{"E2E_TOKEN=" + e2eToken}, "--config", cfg, "--metrics-listen", "127.0.0.1:0")
	var addr string
	for _, line := range strings.Split(h.logs(), "\n") {
		var ev struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Msg == "metrics_listening" {
			addr = ev.Addr
		}
	}
	if addr == "" {
		t.Fatalf("no metrics_listening line:\n%s", h.logs())
	}
	open := "http://" + addr + "/metrics"
	calls := func(fams map[string]*dto.MetricFamily, tool, source, class string) float64 {
		return series(fams, "crewlet_tool_calls_total", map[string]string{"tool": tool, "source": source, "class": class})
	}
	before := scrapeMetrics(t, open, "")

	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	callTool(t, cs, "test_simple_text", map[string]any{})
	callTool(t, cs, "test_simple_text", map[string]any{})
	callTool(t, cs, "test_error_handling", map[string]any{})
	callTool(t, cs, "no_such_tool_at_all", map[string]any{})
	resp, err := http.Get(h.baseURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token on the operator listener: %s", resp.Status)
	}
	after := scrapeMetrics(t, h.baseURL()+"/metrics", e2eToken)
	for _, c := range []struct {
		tool, source, class string
		moved               float64
	}{
		{"test_simple_text", "mcp:everything", "none", 2},
		{"test_error_handling", "mcp:everything", "server_error", 1},
		{"(unregistered)", "", "not_found", 1},
	} {
		if d := calls(after, c.tool, c.source, c.class) - calls(before, c.tool, c.source, c.class); d != c.moved {
			t.Errorf("%s %s %s moved by %v, want %v", c.tool, c.source, c.class, d, c.moved)
		}
	}
	if n := series(after, "crewlet_tool_call_duration_seconds", map[string]string{"tool": "test_simple_text", "source": "mcp:everything"}); n != 2 {
		t.Errorf("latency observations %v, want 2", n)
	}
	// A request is counted once its handler returned, which can be just
	// after its client read the answer.
	for deadline := time.Now().Add(5 * time.Second); ; {
		n := series(after, "crewlet_operator_requests_total", map[string]string{"route": "GET /metrics", "code": "401"})
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused scrapes counted %v, want 1", n)
		}
		time.Sleep(20 * time.Millisecond)
		after = scrapeMetrics(t, h.baseURL()+"/metrics", e2eToken)
	}
	for server, state := range map[string]string{"everything": "running", "ghost": "failing"} {
		if v := series(after, "crewlet_mcp_server_state", map[string]string{"server": server, "state": state}); v != 1 {
			t.Errorf("%s is not %s in the metrics", server, state)
		}
	}
	for _, g := range []string{"crewlet_log_position", "crewlet_projection_position", "crewlet_projection_lag_entries", "crewlet_operator_sessions"} {
		if after[g] == nil {
			t.Errorf("%s missing", g)
		}
	}

	// A child killed is restarted, and the restart counted.
	if err := killChild(t, h, "metrics-everything"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for series(scrapeMetrics(t, open, ""), "crewlet_mcp_server_restarts_total", map[string]string{"server": "everything"}) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no restart counted after the child was killed")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// otlpCollector takes OTLP/HTTP trace exports, as a collector would, and
// keeps the names of the spans and their parents.
type otlpCollector struct {
	mu    sync.Mutex
	spans map[string][]byte // span id -> parent span id, by name below
	names map[string]string // span id -> name
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not a trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans[string(s.GetSpanId())] = s.GetParentSpanId()
				c.names[string(s.GetSpanId())] = s.GetName()
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// hopUnderCall reports whether an upstream hop span for tool arrived whose
// parent is that tool's call span.
func (c *otlpCollector) hopUnderCall(tool string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, name := range c.names {
		if name == "upstream tools/call "+tool && c.names[string(c.spans[id])] == "tools/call "+tool {
			return true
		}
	}
	return false
}

// The built binary exports its spans over OTLP/HTTP to the collector
// OTEL_EXPORTER_OTLP_ENDPOINT names: a tool call's span with the upstream
// hop as its child.
func TestTracesExportedOverOTLP(t *testing.T) {
	col := &otlpCollector{spans: map[string][]byte{}, names: map[string]string{}}
	srv := httptest.NewServer(col)
	defer srv.Close()
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf("  - {name: everything, command: %q}\n", bin),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	callTool(t, cs, "test_simple_text", map[string]any{})
	deadline := time.Now().Add(15 * time.Second)
	for !col.hopUnderCall("test_simple_text") {
		if time.Now().After(deadline) {
			t.Fatalf("no upstream hop under its call exported; got %v", col.names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killChild kills, with SIGKILL, the hub's child whose environment says
// WHO=who.
func killChild(t *testing.T, h *hubProc, who string) error {
	t.Helper()
	kids := childByServer(t, h)
	if kids[who] == 0 {
		return fmt.Errorf("no child with WHO=%s among %v", who, kids)
	}
	return syscall.Kill(kids[who], syscall.SIGKILL)
}
