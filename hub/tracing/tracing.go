// Package tracing is a hub node's OpenTelemetry traces: a span for each
// operator request, one for each tool call under it, and one for each hop
// to a third-party server under the call it serves. They are exported over
// OTLP/HTTP when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) variable is set; otherwise the node
// traces nothing and each seam costs an interface call and a branch.
//
// It watches the hub only through the hub's observer seams
// (hub.RequestObserver, hub.CallObserver, upstream.HopObserver), so neither
// the router nor an upstream instance holds tracing code. Spans carry tool
// and server names, never arguments, results, seats or credentials.
//
// A Tracing is safe for concurrent use. Its exporter's goroutine (the
// batch processor's) is owned by it and ended by Shutdown, which flushes
// what is queued; Shutdown is safe to call twice.
package tracing

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// scope names the instrumentation in every span it makes.
const scope = "github.com/crewlet/hub"

// Tracing makes the hub's spans.
type Tracing struct {
	on       bool
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
	once     sync.Once
	err      error
}

var (
	_ hub.CallObserver     = (*Tracing)(nil)
	_ hub.RequestObserver  = (*Tracing)(nil)
	_ upstream.HopObserver = (*Tracing)(nil)
)

// Off traces nothing: a no-op tracer provider behind seams that return at
// once.
func Off() *Tracing {
	return &Tracing{tracer: noop.NewTracerProvider().Tracer(scope), prop: propagation.TraceContext{}}
}

// New traces into tp; a test passes one with an in-memory exporter.
// Shutdown does not shut tp down: it is the caller's.
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{on: true, tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(hub.Version)), prop: propagation.TraceContext{}}
}

// FromEnv exports over OTLP/HTTP when the standard variables name an
// endpoint, reading the rest of the exporter's settings (headers,
// timeout, protocol details) from the same standard variables, and is Off
// otherwise, or when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// The service is named crewlet-hub unless OTEL_SERVICE_NAME says otherwise.
func FromEnv(ctx context.Context, lookup func(string) (string, bool)) (*Tracing, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return Off(), nil
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(get("OTEL_TRACES_EXPORTER"), "none") {
		return Off(), nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "crewlet-hub"), attribute.String("service.version", hub.Version)))
	if err == nil {
		// The operator's own naming (OTEL_SERVICE_NAME,
		// OTEL_RESOURCE_ATTRIBUTES) wins over the hub's.
		res, err = resource.Merge(res, resource.Environment())
	}
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// On reports whether spans are made.
func (t *Tracing) On() bool { return t.on }

// Shutdown flushes the spans still queued and stops the exporter, within
// ctx. Safe to call twice; an Off or New tracing has nothing to stop.
func (t *Tracing) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		if t.shutdown != nil {
			t.err = t.shutdown(ctx)
		}
	})
	return t.err
}

func endNothing(hub.Source, *mcp.CallToolResult) {}

// CallStarted opens a tool call's span in the context the call runs in.
func (t *Tracing) CallStarted(ctx context.Context, tool string) (context.Context, hub.CallDone) {
	if !t.on {
		return ctx, endNothing
	}
	if h := hub.CallHeader(ctx); h != nil {
		// The call's request, not the one that opened its session, is
		// its parent (RequestStarted put its span in the header).
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	}
	ctx, span := t.tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool)))
	return ctx, func(src hub.Source, res *mcp.CallToolResult) {
		attrs := []attribute.KeyValue{attribute.String("crewlet.tool.source", string(src))}
		if res != nil && res.IsError {
			class := "server_error"
			if c, ok := servers.ClassOf(res); ok {
				class = string(c)
			}
			attrs = append(attrs, attribute.String("crewlet.refusal.class", class))
			span.SetStatus(codes.Error, class)
		}
		span.SetAttributes(attrs...)
		span.End()
	}
}

func hopNothing(error) {}

// HopStarted opens the upstream hop's span, a child of the call's.
func (t *Tracing) HopStarted(ctx context.Context, server, tool string) (context.Context, func(error)) {
	if !t.on {
		return ctx, hopNothing
	}
	ctx, span := t.tracer.Start(ctx, "upstream tools/call "+tool, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("crewlet.mcp.server", server)))
	return ctx, func(err error) {
		if err != nil {
			// The kind of failure, not its text: an error can quote what
			// the server was started with.
			span.SetStatus(codes.Error, hopFailure(err))
		}
		span.End()
	}
}

// hopFailure names how a hop failed without its words.
func hopFailure(err error) string {
	var down *upstream.DownError
	switch {
	case errors.As(err, &down):
		return "server down"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return "failed"
}

func requestNothing(string, int) {}

// RequestStarted opens an operator request's span, continuing a trace the
// caller sent in its traceparent header.
func (t *Tracing) RequestStarted(r *http.Request) (context.Context, func(string, int)) {
	if !t.on {
		return r.Context(), requestNothing
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	// The request's own span is said in its header, where a call a 2025
	// session serves in another request's context finds its parent.
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return ctx, func(route string, status int) {
		if route != "" {
			// A pattern names the route, and may name the method too.
			name := route
			if !strings.Contains(route, " ") {
				name = r.Method + " " + route
			}
			span.SetName(name)
			span.SetAttributes(attribute.String("http.route", route))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
}
