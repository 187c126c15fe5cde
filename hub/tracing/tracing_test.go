package tracing_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/search/searchtest"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/tracing"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, searchtest.LeakOptions()...) }

const token = "tracing-test-token-1"

// tracedHub is a hub with the echo first-party server and one HTTP
// upstream, traced through the seams as a node traces it.
func tracedHub(t testing.TB, tr *tracing.Tracing) (h *hub.Hub, url string) {
	t.Helper()
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	company := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf("{name: up, url: %q}", up)).Parse(t)
	opts := hub.Options{
		Company:    company,
		Env:        hubtest.NewEnv(map[string]string{"ADA_TOKEN": token}).Lookup,
		FirstParty: []hub.FirstParty{{Name: "echo", New: func(trust servers.Trust, _ hub.Deps) *mcp.Server { return hubtest.EchoServer(trust) }}},
	}
	if tr != nil {
		opts.Observers = hub.Observers{Calls: tr, Hops: tr}
	}
	h, err := hub.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var handler = h.Handler()
	if tr != nil {
		handler = hub.ObserveRequests(handler, tr)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return h, srv.URL
}

// One span per tool call, each under the operator request that carried
// it (a 2025 session's too, whose calls run in the context of the request
// that opened it); a third-party call's hop to its server is a child of
// its call's span, a first-party call has none, and a refusal marks its
// span with its class. No span carries an argument.
func TestOneSpanPerCallWithTheUpstreamHopAsChild(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) { spanPerCall(t, version) })
	}
}

func spanPerCall(t *testing.T, version string) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, url := tracedHub(t, tracing.New(tp))

	cs := hubtest.Connect(t, url+"/operator/mcp", token, version)
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"echo_up", map[string]any{"secret_looking_arg": "hunter2"}},
		{"echo_up", map[string]any{}},
		{"echo", map[string]any{"text": "hi"}},
		{"echo", map[string]any{"text": "no", "refuse": "conflict"}},
	} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: c.args}); err != nil {
			t.Fatal(err)
		}
	}
	// A request's span ends when its handler returns, which can be just
	// after the client has read the answer: wait for every call's parent.
	spans := settled(t, exp)
	byID := map[trace.SpanID]tracetest.SpanStub{}
	children := map[trace.SpanID][]tracetest.SpanStub{}
	var calls []tracetest.SpanStub
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		children[s.Parent.SpanID()] = append(children[s.Parent.SpanID()], s)
		if s.SpanKind == trace.SpanKindInternal {
			calls = append(calls, s)
		}
		for _, a := range s.Attributes {
			if a.Value.String() == "hunter2" {
				t.Fatalf("span %q carries an argument's value", s.Name)
			}
		}
	}
	if len(calls) != 4 {
		t.Fatalf("%d tool call spans, want 4: %v", len(calls), names(spans))
	}
	parents := map[trace.SpanID]bool{}
	for i, want := range []string{"tools/call echo_up", "tools/call echo_up", "tools/call echo", "tools/call echo"} {
		call := calls[i]
		if parents[call.Parent.SpanID()] {
			t.Fatalf("%s: its parent is another call's: each call's span is under its own request", call.Name)
		}
		parents[call.Parent.SpanID()] = true
		if call.Name != want {
			t.Fatalf("call span %d is %q, want %q", i, call.Name, want)
		}
		parent, ok := byID[call.Parent.SpanID()]
		if !ok || parent.SpanKind != trace.SpanKindServer || parent.Name != "POST /operator/mcp" || parent.SpanContext.TraceID() != call.SpanContext.TraceID() {
			t.Fatalf("%s: its parent is %q (%v), want the operator request's span", call.Name, parent.Name, ok)
		}
		hops := children[call.SpanContext.SpanID()]
		switch {
		case want == "tools/call echo_up":
			if len(hops) != 1 || hops[0].SpanKind != trace.SpanKindClient || hops[0].Name != "upstream tools/call echo_up" ||
				!hasAttr(hops[0].Attributes, "crewlet.mcp.server", "up") {
				t.Fatalf("%s: children %v, want one upstream hop to up", call.Name, names(hops))
			}
			if !hasAttr(call.Attributes, "crewlet.tool.source", "mcp:up") {
				t.Fatalf("%s: attributes %v", call.Name, call.Attributes)
			}
		case len(hops) != 0:
			t.Fatalf("%s: a first-party call has hops %v", call.Name, names(hops))
		}
	}
	if refused := calls[3]; refused.Status.Code != codes.Error || !hasAttr(refused.Attributes, "crewlet.refusal.class", "conflict") {
		t.Fatalf("refused call span: status %v attributes %v", refused.Status, refused.Attributes)
	}
	if calls[2].Status.Code == codes.Error {
		t.Fatal("an answered call's span is marked as an error")
	}
}

// Off makes no span and hands each seam's context back as it came.
func TestOffTracesNothing(t *testing.T) {
	tr := tracing.Off()
	ctx := context.Background()
	if got, _ := tr.CallStarted(ctx, "echo"); got != ctx {
		t.Fatal("off: the call's context changed")
	}
	if got, _ := tr.HopStarted(ctx, "up", "echo"); got != ctx {
		t.Fatal("off: the hop's context changed")
	}
	if tr.On() {
		t.Fatal("off reports on")
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// FromEnv traces only where the standard variables name a collector.
func TestFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, c := range []struct {
		vars map[string]string
		on   bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		tr, err := tracing.FromEnv(context.Background(), env(c.vars))
		if err != nil {
			t.Fatal(err)
		}
		if tr.On() != c.on {
			t.Errorf("%v: on %v, want %v", c.vars, tr.On(), c.on)
		}
		// Nothing was exported, so nothing waits on the collector.
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("%v: shutdown: %v", c.vars, err)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("%v: second shutdown: %v", c.vars, err)
		}
	}
}

func names(spans []tracetest.SpanStub) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func hasAttr(attrs []attribute.KeyValue, key, value string) bool {
	for _, a := range attrs {
		if string(a.Key) == key && a.Value.String() == value {
			return true
		}
	}
	return false
}

// settled waits until every exported span's parent is exported too (a
// root has none), and answers them.
func settled(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := exp.GetSpans()
		ids := map[trace.SpanID]bool{}
		for _, s := range spans {
			ids[s.SpanContext.SpanID()] = true
		}
		orphans := 0
		for _, s := range spans {
			if s.Parent.IsValid() && !ids[s.Parent.SpanID()] {
				orphans++
			}
		}
		if orphans == 0 {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans' parents never ended: %v", orphans, names(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
