package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The test binary also plays this command's roles (echo-server, relay,
// sdk-proxy), which is how a real run (TestRunMeasuresEveryPath) starts
// them: as the HTTP echo server, as the hub's stdio child and as the
// references, by executing itself with the role as the first argument. Every goroutine a
// test starts must be stopped by its owner before the tests end.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if role, ok := roles[os.Args[1]]; ok {
			// Stopped by a signal, as the real commands are.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err := role(ctx, os.Args[2:])
			stop()
			if err != nil {
				fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	goleak.VerifyTestMain(m)
}
