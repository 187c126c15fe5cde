package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Throughput on a small shared machine moves with whatever else runs on it;
// the CPU time each process spends per call does not, much. So each row also
// says where the CPU went: the load client (this process), the hub, and the
// upstream that answered (the HTTP echo server or the hub's stdio child).

// clockTick is USER_HZ, which Linux fixes at 100 for /proc/PID/stat.
const clockTick = 10 * time.Millisecond

// procCPU is the user+system CPU time pid has used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// After the command: state(0) ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime(11) stime(12).
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// cpuRoles names the processes whose CPU a row accounts for.
type cpuRoles struct {
	hub      int // 0 on the direct path
	upstream int
}

type cpuUse struct{ client, hub, upstream time.Duration }

func sampleCPU(r cpuRoles) cpuUse {
	var u cpuUse
	u.client, _ = procCPU(os.Getpid())
	if r.hub != 0 {
		u.hub, _ = procCPU(r.hub)
	}
	if r.upstream != 0 {
		u.upstream, _ = procCPU(r.upstream)
	}
	return u
}

func (u cpuUse) sub(v cpuUse) cpuUse {
	return cpuUse{u.client - v.client, u.hub - v.hub, u.upstream - v.upstream}
}

// perCall renders d spread over calls, in microseconds.
func perCall(d time.Duration, calls int64) string {
	if calls == 0 {
		return "-"
	}
	return strconv.FormatInt(d.Microseconds()/calls, 10)
}
