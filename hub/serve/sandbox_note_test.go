package serve

import (
	"log/slog"
	"strings"
	"testing"
)

// Issue 38 (CAT-3): on a node without bwrap, serve says as it starts that
// coding runs are not offered and why, on the banner and in the log; with
// bwrap it says nothing of the sandbox.
func TestServeSaysWhyNoSandbox(t *testing.T) {
	logs := &syncBuffer{}
	t.Setenv("PATH", t.TempDir())
	_, out, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: noEnv,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  no sandbox: bwrap (Debian's bubblewrap package) is not installed on this node, so coding runs (run_sandbox) are not offered") {
		t.Fatalf("the banner does not say why there is no sandbox:\n%s", out)
	}
	if !strings.Contains(logs.String(), `"msg":"sandbox_unavailable"`) {
		t.Fatalf("no sandbox_unavailable record in the log:\n%s", logs)
	}
}

func TestServeSaysNothingOfAWorkingSandbox(t *testing.T) {
	_, out, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: noEnv})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "sandbox") {
		t.Fatalf("the banner speaks of a sandbox this node has:\n%s", out)
	}
}
