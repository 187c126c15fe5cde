//go:build pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles, on the default mux of this build only
	"os"
	"runtime"
	"strconv"
)

// A build with -tags pprof serves net/http/pprof on the address in
// CREWLET_PPROF (a loopback one, say 127.0.0.1:6060), so a hub under
// crewlet-load can be profiled where it runs. The tag keeps the handlers,
// which answer anyone who reaches the address, out of every other build.
// CREWLET_MEMPROFILERATE sets runtime.MemProfileRate (bytes per sample;
// 512 KiB by default), for a heap profile fine enough to account for
// small objects held by many sessions.
func init() {
	if n, err := strconv.Atoi(os.Getenv("CREWLET_MEMPROFILERATE")); err == nil && n > 0 {
		runtime.MemProfileRate = n
	}
	addr := os.Getenv("CREWLET_PPROF")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crewlet: CREWLET_PPROF:", err)
		return
	}
	go func() { _ = http.Serve(ln, nil) }()
}
