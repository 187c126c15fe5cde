package upstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkCallRaw is one echo call through an instance, over each
// transport: what the link costs the hub per forwarded call.
func BenchmarkCallRaw(b *testing.B) {
	r := startRemote(b, "127.0.0.1:0", false)
	for name, spec := range map[string]Resolved{
		"stdio": testSpec(b, "go-sdk", nil),
		"http":  {Name: "remote", Transport: TransportHTTP, URL: "http://" + r.addr + "/"},
	} {
		b.Run(name, func(b *testing.B) {
			in, _ := startTest(b, spec, nil)
			waitState(b, in, StateRunning, 10*time.Second)
			args := json.RawMessage(`{"text":"hello"}`)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := in.CallRaw(ctx, "echo", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
