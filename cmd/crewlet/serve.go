package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	runtimedebug "runtime/debug"
	"syscall"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/serve"
)

// serveCmd is `crewlet serve`: flags, signals, and serve.Run.
func serveCmd(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "company file (YAML); without one the embedded default company runs")
	listen := fs.String("listen", "127.0.0.1:8420", "address to listen on; port 0 picks a free one")
	dataDir := fs.String("data-dir", "./.crewlet", "where the hub keeps its data")
	debug := fs.Bool("debug", false, "log at debug level")
	sessionIdle := fs.Duration("session-idle", hub.DefaultSessionIdle, "close a 2025 MCP session no request has used for this long")
	metricsListen := fs.String("metrics-listen", "", "also serve GET /metrics on this address, without a token (the operator listener serves it behind the token)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The hub holds little memory but allocates a lot per forwarded call
	// (every JSON message it parses); a higher GC target trades a little
	// heap for much less collection. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		runtimedebug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serve.Run(ctx, serve.Options{
		ConfigFile:    *cfgPath,
		Listen:        *listen,
		DataDir:       *dataDir,
		Logger:        newLogger(*debug),
		Reload:        hup,
		SessionIdle:   *sessionIdle,
		MetricsListen: *metricsListen,
	})
}
