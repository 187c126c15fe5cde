package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// What an idle 2025-11-25 session costs the hub: n go-sdk sessions are
// opened, each with its standalone event stream (a GET the hub holds open),
// and left idle; the hub's memory is read before and after, each time after
// a collection it is asked for, so garbage the GC target lets pile up is
// not counted as the sessions'. The resident set is shown beside it: it
// includes what the runtime keeps of freed memory.

type idleResult struct {
	sessions                int
	liveKiB, rssKiB, stacks float64 // per session
	objectsKiB              float64 // per session: the heap's live objects, without the spans' free room
	goroutines              float64 // per session
}

// measureIdle opens n idle sessions and reads what they cost; with a
// profile name, the hub's live heap and goroutines are saved with it.
func measureIdle(ctx context.Context, t target, n int, tr *http.Transport, pprofAddr, profile string) (idleResult, error) {
	res := idleResult{sessions: n}
	pid := t.cpu.hub
	before, rss0, err := idleSample(ctx, t, tr, pid)
	if err != nil {
		return res, err
	}
	sessions, err := connect(ctx, t, n, tr)
	if err != nil {
		return res, err
	}
	defer closeAll(sessions)
	// Let the streams settle: every session's GET has been answered when
	// Connect returns, but the hub may still be finishing its side.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	after, rss1, err := idleSample(ctx, t, tr, pid)
	if err != nil {
		return res, err
	}
	if pprofAddr != "" {
		for _, p := range []string{"heap", "goroutine"} {
			if err := fetchTo(ctx, "http://"+pprofAddr+"/debug/pprof/"+p, profile+"."+p+".pprof", 30*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "crewlet-load: %s profile of the idle sessions: %v\n", p, err)
			}
		}
		// The same heap as text ends with the runtime's memory statistics:
		// what the resident set holds beside the heap and the stacks.
		if err := fetchTo(ctx, "http://"+pprofAddr+"/debug/pprof/heap?debug=1", profile+".heap.txt", 30*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "crewlet-load: the idle sessions' memory statistics: %v\n", err)
		}
	}
	if got := after.OperatorSessions - before.OperatorSessions; got < n {
		return res, fmt.Errorf("idle: %d sessions opened, the hub holds %d more", n, got)
	}
	live := func(r runtimeRow) float64 { return float64(r.HeapInuseBytes + r.StackInuseBytes) }
	res.liveKiB = (live(after) - live(before)) / 1024 / float64(n)
	res.objectsKiB = (float64(after.HeapAllocBytes) - float64(before.HeapAllocBytes)) / 1024 / float64(n)
	res.stacks = float64(int64(after.StackInuseBytes)-int64(before.StackInuseBytes)) / 1024 / float64(n)
	res.rssKiB = float64(rss1-rss0) / float64(n)
	res.goroutines = float64(after.Goroutines-before.Goroutines) / float64(n)
	return res, nil
}

func idleSample(ctx context.Context, t target, tr *http.Transport, pid int) (runtimeRow, int64, error) {
	row, err := hubRuntime(ctx, t.runtime, tr, t.token, true)
	if err != nil {
		return row, 0, fmt.Errorf("idle: %w", err)
	}
	if row.HeapInuseBytes == 0 {
		return row, 0, fmt.Errorf("idle: the hub does not report its live memory (GET /debug/runtime has no heap_inuse_bytes)")
	}
	rss, err := rssKiB(pid)
	return row, rss, err
}

// rssKiB is the process's resident set, from /proc.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

func (r idleResult) print() {
	fmt.Printf("\nidle %s sessions with their event streams, %d open: per session %.1f KiB live (heap and stacks, after a collection; stacks %.1f KiB, heap objects %.1f KiB), %.1f KiB resident, %.1f goroutines\n",
		rev2025, r.sessions, r.liveKiB, r.stacks, r.objectsKiB, r.rssKiB, r.goroutines)
}
