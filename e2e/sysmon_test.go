package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// godebugOf reads the GODEBUG a running process was started (or last
// exec'd) with.
func godebugOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("reading the hub's environment: %v", err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
			return string(v)
		}
	}
	return ""
}

// `crewlet serve` execs itself in place with the scheduler trace that
// keeps Go's sysmon out of its deep sleep: the process that answers is
// the one started, and its environment is the exec's. An operator's own
// schedtrace is left alone.
func TestServeKeepsSysmonAwake(t *testing.T) {
	h := startHub(t, []string{"GODEBUG=gctrace=0"})
	if got := godebugOf(t, h.cmd.Process.Pid); got != "gctrace=0,schedtrace=2147483647" {
		t.Errorf("the serving hub's GODEBUG = %q; want the operator's setting and the trace", got)
	}
	own := startHub(t, []string{"GODEBUG=schedtrace=0"})
	if got := godebugOf(t, own.cmd.Process.Pid); got != "schedtrace=0" {
		t.Errorf("with the operator's schedtrace=0 the hub's GODEBUG = %q; want it as set", got)
	}
}
