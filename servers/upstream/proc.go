package upstream

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// proc names one process for good: a pid alone is not enough, since the
// kernel hands a freed pid to the next process that asks (32768 of them
// on a default Linux), and a kill sent to a remembered pid must never reach
// a stranger that inherited it. The start time (clock ticks after boot,
// /proc/<pid>/stat field 22) tells them apart.
type proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// procStat is what the hub reads of a process in /proc/<pid>/stat.
type procStat struct {
	state byte
	ppid  int
	pgid  int
	start uint64
}

// readStat reads a process's stat line; false if it is gone (or /proc is
// not there).
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name is in parentheses and may hold spaces and
	// parentheses itself: the fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid, pgid: pgid, start: start}, true
}

// identify names the process running as pid now; false if none is (a
// zombie counts as none: it can no longer be stopped, only reaped).
func identify(pid int) (proc, procStat, bool) {
	st, ok := readStat(pid)
	if !ok || st.state == 'Z' || st.state == 'X' {
		return proc{}, st, false
	}
	return proc{PID: pid, Start: st.start}, st, true
}

// running reports whether p is still the process running as its pid.
func (p proc) running() bool {
	now, _, ok := identify(p.PID)
	return ok && now == p
}

// signal sends sig to p if p is still the process running as its pid.
func (p proc) signal(sig syscall.Signal) {
	if p.PID > 0 && p.running() {
		_ = syscall.Kill(p.PID, sig)
	}
}

// childrenOf lists pid's direct children, from each of its threads'
// children files; nil once it is gone.
func childrenOf(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// bootID names this boot of the machine: a process recorded in another
// boot is gone, whatever now runs with its pid and start time.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
