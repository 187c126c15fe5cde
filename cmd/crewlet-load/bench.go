package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// bench is what every measuring mode starts from: a directory of its own,
// the hub binary it measures, and the HTTP echo server. The echo server is
// a process of its own, as a vendor's server would be, so the load
// generator's runtime (its GC, its scheduler) is not shared with the
// server it measures.
type bench struct {
	self     string // this binary: the echo server, relay and proxy are it
	tmp      string
	bin      string // the crewlet binary
	echo     *proc
	echoAddr string
}

// openBench makes the directory (named from prefix), finds the hub binary
// unless hubBin names it, and starts the echo server.
func openBench(ctx context.Context, prefix, hubBin string) (b *bench, err error) {
	b = &bench{bin: hubBin}
	if b.self, err = os.Executable(); err != nil {
		return nil, err
	}
	if b.tmp, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(b.tmp)
		}
	}()
	if b.bin == "" {
		if b.bin, err = findHub(ctx, b.self, b.tmp); err != nil {
			return nil, err
		}
	}
	if b.echo, b.echoAddr, err = startServer("echo server", b.self, "echo-server", "--http", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	return b, nil
}

// close stops the echo server and removes the directory, or keeps it:
// when asked (--keep), and after a failure, for the hub's logs (what names
// them) — not after an interrupt, which is no failure of the hub's.
func (b *bench) close(ctx context.Context, keep bool, err error, what string) {
	b.echo.stop(5 * time.Second)
	if keep || (err != nil && ctx.Err() == nil) {
		fmt.Fprintf(os.Stderr, "crewlet-load: kept %s (%s)\n", b.tmp, what)
		return
	}
	_ = os.RemoveAll(b.tmp)
}
