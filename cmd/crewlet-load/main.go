// Command crewlet-load measures what the hub costs a tool call: the same echo
// upstream called directly and through the hub, on each protocol revision,
// in one run, side by side; the hub's own first-party reads and writes; and
// what an idle session holds.
//
//	crewlet-load run [--hub-binary PATH] [--duration 10s] [--sessions 1,8,64] [--revisions 2025-11-25,2026-07-28] [--sections forward,first-party,tracker,idle]
//	crewlet-load soak [--hub-binary PATH] [--idle-sessions 8000] [--active 2000] [--rate 100] [--duration 10m] [--interval 1m] [--session-idle 1m]
//	crewlet-load fleet [--hub-binary PATH] [--layouts 1,3x3,3x1] [--duration 10s] [--sessions 64] [--write-sessions 64]
//	crewlet-load echo-server (--stdio | --http ADDR)
//	crewlet-load relay --to URL [--listen ADDR]
//
// The binary is also the echo upstream it measures, so the hub can start it
// as a stdio child and the run can start it as an HTTP server: one program,
// one tool implementation, whichever transport carries it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  crewlet-load run [--hub-binary PATH] [--duration 10s] [--sessions 1,8,64] [--revisions 2025-11-25,2026-07-28]
                   [--sections forward,first-party,tracker,idle] [--write-sessions 64] [--list-sessions 16] [--idle-sessions 1000]
                   [--rounds 1] [--hub-env K=V]... [--max-calls N] [--profile DIR] [--keep]
  crewlet-load soak [--hub-binary PATH] [--idle-sessions 8000] [--active 2000] [--rate 100] [--duration 10m] [--interval 1m]
                    [--warmup 2m] [--baseline 1m] [--baseline-sessions 64] [--clients-per-token 32] [--session-idle 1m]
                    [--call-timeout 30s] [--keep]
  crewlet-load fleet [--hub-binary PATH] [--layouts 1,3x3,3x1] [--duration 10s] [--sessions 64] [--write-sessions 64]
                     [--revision 2026-07-28] [--rounds 1] [--keep]
  crewlet-load echo-server (--stdio | --http ADDR)
  crewlet-load relay --to URL [--listen ADDR]
  crewlet-load sdk-proxy --to URL [--listen ADDR]`

// roles are the processes a run starts from this binary beside the hub:
// the upstream it measures and the references it sets beside the hub. The
// test binary plays them from this same table.
var roles = map[string]func(context.Context, []string) error{
	"echo-server": echoServer,
	"relay":       relayServer,
	"sdk-proxy":   sdkProxyServer,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	// Interrupt and SIGTERM end the context, so every command unwinds
	// through its deferred cleanup instead of leaving children behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	switch {
	case os.Args[1] == "run":
		err = run(ctx, os.Args[2:])
	case os.Args[1] == "soak":
		err = soak(ctx, os.Args[2:])
	case os.Args[1] == "fleet":
		err = fleet(ctx, os.Args[2:])
	case roles[os.Args[1]] != nil:
		err = roles[os.Args[1]](ctx, os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		stop()
		os.Exit(2)
	}
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case err != nil && interrupted:
		fmt.Fprintln(os.Stderr, "crewlet-load: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "crewlet-load:", err)
		os.Exit(1)
	}
}

// parseFlags parses a command's flags and refuses any other word: parsing
// stops at the first word that is not a flag, and whatever follows it
// would be silently ignored, flags included.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s takes flags only; %q is not one", fs.Name(), fs.Arg(0))
	}
	return nil
}
