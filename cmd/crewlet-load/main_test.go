package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The test binary also plays this command's echo-server role, which is how
// a real run (TestRunMeasuresEveryPath) starts it: as the HTTP echo server
// and as the hub's stdio child, both by executing itself with echo-server
// as the first argument. Every goroutine a test starts must be stopped by
// its owner before the tests end.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "echo-server" {
		if err := echoServer(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "echo-server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
