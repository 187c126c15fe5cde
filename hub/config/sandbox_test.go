package config

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/crewlet/hub/sandbox"
)

// Issue 38: the sandbox block reaches package sandbox as written, and a
// company without one gets every default: bubblewrap, no network, the
// builtin agent.
func TestSandboxConfigFromTheBlock(t *testing.T) {
	data, err := os.ReadFile("testdata/check/sandbox-ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Config{
		Runtime: "bubblewrap", Network: "host",
		Limits: sandbox.Limits{Wall: 45 * time.Minute, CPUSeconds: 900, MemoryMB: 4096, Processes: 512, FileMB: 100,
			Files: 5000, DiskMB: 4096, OutputMB: 32, Park: 48 * time.Hour},
		Agent: sandbox.AgentSpec{CLI: "opencode", Command: "/opt/opencode/bin/opencode", Args: []string{"--print-logs"}},
	}
	if got := c.SandboxConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	def := Default().SandboxConfig()
	if def.Runtime != sandbox.RuntimeBubblewrap || def.Network != sandbox.NetworkNone || !def.Agent.Builtin() ||
		def.Limits != (sandbox.Limits{}).WithDefaults() {
		t.Fatalf("the default company's sandbox: %+v", def)
	}
}
