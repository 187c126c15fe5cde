package main

import (
	"os"
	"strings"
	"syscall"
)

// Why `crewlet serve` execs itself once as it starts.
//
// Go's runtime has a monitor thread, sysmon, that goes into a deep sleep
// whenever every P is idle; the first system call after that (every read
// and write on a socket is one) wakes it with a futex, and it then polls
// every 20 µs until it finds the Ps idle again and sleeps again. A hub
// forwarding calls at a low rate is idle between nearly every read and
// write it makes (it waits for its client, then for the upstream), so
// sysmon was put to sleep and woken several times per call. Measured at
// one client session, that was about a third of the hub's CPU per
// forwarded call and a fifth to a quarter of a first-party read's. Under load some P is
// always busy and sysmon never sleeps deeply, so this costs nothing there.
//
// The runtime keeps sysmon out of that deep sleep only while a scheduler
// trace is asked for (GODEBUG schedtrace), and it reads that setting only
// when the process starts. So serve asks for the trace at its longest
// period, about 24.8 days, and execs its own binary in place: the same
// pid, descriptors and arguments. Without anything to do, sysmon then
// wakes every 10 ms, about 100 short wakeups a second.
//
// The price: once the machine has been up that long (the runtime counts
// from boot), the runtime writes one "SCHED ..." line to stderr, and again
// every 24.8 days; a fatal crash's report also has the scheduler's state.
// An operator who sets schedtrace in GODEBUG (schedtrace=0 turns the trace
// off and lets sysmon sleep) is left as they chose. Children never see it:
// a stdio server's environment is built from an allowlist.

// sysmonTrace is the longest period GODEBUG schedtrace takes: milliseconds,
// a 32-bit integer.
const sysmonTrace = "schedtrace=2147483647"

// sysmonAwake answers env with sysmonTrace added to GODEBUG, and whether it
// added it: not when GODEBUG already sets schedtrace. Only the first
// GODEBUG entry counts, as it is the one the runtime reads.
func sysmonAwake(env []string) ([]string, bool) {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		for _, field := range strings.Split(v, ",") {
			if key, _, _ := strings.Cut(field, "="); key == "schedtrace" {
				return env, false
			}
		}
		out := append([]string(nil), env...)
		if v == "" {
			out[i] = "GODEBUG=" + sysmonTrace
		} else {
			out[i] = kv + "," + sysmonTrace
		}
		return out, true
	}
	return append(append([]string(nil), env...), "GODEBUG="+sysmonTrace), true
}

// keepSysmonAwake execs this binary again with sysmonTrace in GODEBUG,
// unless GODEBUG already sets schedtrace. It returns only when it does not
// exec (or the exec fails: the hub then runs as it would have, sysmon
// sleeping).
func keepSysmonAwake() {
	env, changed := sysmonAwake(os.Environ())
	if !changed {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env)
}
