package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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

// allocUse is what the hub allocated, from its GET /debug/runtime: the
// counters only grow, so two readings bracket a measurement.
type allocUse struct {
	objects, bytes uint64
	ok             bool
}

func (a allocUse) sub(b allocUse) allocUse {
	return allocUse{objects: a.objects - b.objects, bytes: a.bytes - b.bytes, ok: a.ok && b.ok}
}

// sampleAllocs reads the hub's allocation counters; ok is false on the
// direct path, and for a hub too old to report them.
func sampleAllocs(ctx context.Context, url string, tr http.RoundTripper, token string) (allocUse, bool) {
	if url == "" {
		return allocUse{}, false
	}
	row, err := hubRuntime(ctx, url, tr, token, false)
	if err != nil || row.Mallocs == 0 {
		return allocUse{}, false
	}
	return allocUse{objects: row.Mallocs, bytes: row.TotalAllocBytes, ok: true}, true
}

// runtimeRow is what the hub's GET /debug/runtime answers.
type runtimeRow struct {
	Goroutines       int    `json:"goroutines"`
	HeapAllocBytes   uint64 `json:"heap_alloc_bytes"`
	OperatorSessions int    `json:"operator_sessions"`
	Mallocs          uint64 `json:"mallocs"`
	TotalAllocBytes  uint64 `json:"total_alloc_bytes"`
	HeapInuseBytes   uint64 `json:"heap_inuse_bytes"`
	StackInuseBytes  uint64 `json:"stack_inuse_bytes"`
}

// hubRuntime reads the hub's runtime figures; gc asks it to collect first,
// so the heap figures are live memory.
func hubRuntime(ctx context.Context, url string, tr http.RoundTripper, token string, gc bool) (runtimeRow, error) {
	var row runtimeRow
	if gc {
		url += "?gc=1"
	}
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return row, err
	}
	resp, err := (&http.Client{Transport: bearerRT{token, tr}, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return row, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return row, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return row, json.NewDecoder(resp.Body).Decode(&row)
}

// perCallFloat renders n spread over calls.
func perCallFloat(n uint64, calls int64) string {
	if calls == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(n)/float64(calls), 'f', 0, 64)
}
