package tracing_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/tracing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// What tracing costs a routed call: none (no observer at all), off (the
// node's default without OTEL_EXPORTER_OTLP_ENDPOINT) and on (every span
// recorded, exported to memory). Off is meant to be none within noise.
//
//	go test ./hub/tracing -run '^$' -bench ToolCall -benchmem
func BenchmarkToolCall(b *testing.B) {
	recording := func() *tracing.Tracing {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tracing.New(tp)
	}
	for _, c := range []struct {
		name string
		tr   func() *tracing.Tracing
	}{
		{"none", func() *tracing.Tracing { return nil }},
		{"off", tracing.Off},
		{"on", recording},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := tracedHub(b, c.tr())
			reg := hub.CompanyRegistry(h.Catalogue())
			caller := authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada"}
			args := json.RawMessage(`{"text":"hi"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := h.Router().Call(ctx, reg, caller, "echo", args); res.IsError {
					b.Fatal("echo refused")
				}
			}
		})
	}
}

// The seam alone, around nothing: what a call pays for tracing beyond the
// work of the call.
func BenchmarkCallSeam(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	res := &mcp.CallToolResult{}
	for name, tr := range map[string]*tracing.Tracing{"off": tracing.Off(), "on": tracing.New(tp)} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, done := tr.CallStarted(ctx, "echo")
				done(hub.SourceBuiltin, res)
			}
		})
	}
}
