package upstream

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// MCP-3, MCP-11: a server that never answers the handshake is reported as
// exactly that, naming the bound, never by how its process ended once the
// hub gave up on it and closed its input.
func TestInstanceHandshakeTimeoutSaysSo(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "mute", nil), func(o *Options) {
		o.StartTimeout = 500 * time.Millisecond
		o.ProbeTimeout = 100 * time.Millisecond
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.events("mcp_server_failed")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no mcp_server_failed: %+v", in.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	reason := fmt.Sprint(logs.events("mcp_server_failed")[0]["reason"])
	if reason != "it did not answer the handshake in 0.5 s" {
		t.Fatalf("mcp_server_failed reason %q", reason)
	}
	if s := in.Status(); s.State != StateDown || !strings.Contains(s.Cause, "did not answer the handshake in 0.5 s") {
		t.Fatalf("status %+v", s)
	}
}
