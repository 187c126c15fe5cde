// Package serve runs a hub node as `crewlet serve` does: the company (a
// file or the embedded one), the secret store, the operator credential, the
// node's durable state, the first-party servers, and the operator surface
// on a listener, until its context ends. The command is a thin main over
// Run.
//
// Ownership: Run owns everything it opens and closes it all before it
// returns; it starts no goroutine that outlives it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/sourcegraph/conc"
)

// Options configure Run. The zero value runs the embedded company on
// 127.0.0.1:8420 with its data in ./.crewlet.
type Options struct {
	// ConfigFile is the company file; empty runs the embedded company.
	ConfigFile string
	// Listen is the address to serve on; port 0 picks a free one.
	Listen string
	// DataDir is where the node keeps its data; created mode 0700.
	DataDir string
	// Logger receives the hub's JSON log; nothing is logged if nil.
	Logger *slog.Logger
	// Stdout receives the banner saying where the hub is and where its
	// token is; os.Stdout if nil.
	Stdout io.Writer
	// Reload, each time it delivers, re-reads the company and the secret
	// store: the command hands it its SIGHUP channel.
	Reload <-chan os.Signal
	// LookupEnv reads the process environment; os.LookupEnv if nil.
	LookupEnv config.Lookup
	// Fleet, if set, makes this node one of a fleet; nil runs the
	// embedded single node.
	Fleet *FleetOptions
}

func (o *Options) ensureDefaults() {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8420"
	}
	if o.DataDir == "" {
		o.DataDir = "./.crewlet"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
}

// Run serves until ctx ends, then shuts down gracefully: open operator
// sessions and servers first, then the listener. It returns an error only
// for a node that could not start or a listener that failed.
func Run(ctx context.Context, o Options) error {
	o.ensureDefaults()
	// One sanitiser redacts tool results and everything the node logs: a
	// server that prints a credential it was given on its stderr, or an
	// error that quotes one, does not put it in the log.
	clean := sanitize.New()
	log := slog.New(sanitize.NewLogHandler(o.Logger.Handler(), clean))
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	// Before any server starts: what a run of this node killed outright
	// left running is ended first.
	ledger, err := upstream.OpenLedger(filepath.Join(o.DataDir, "children.json"), log.With("component", "upstream"))
	if err != nil {
		return err
	}
	src, err := openSources(o)
	if err != nil {
		return err
	}
	company, err := src.load()
	if err != nil {
		return err
	}
	var fleet *fleetConn
	if o.Fleet != nil {
		if fleet, err = joinFleet(ctx, o.DataDir, o.Fleet, log); err != nil {
			return err
		}
	}
	node, closeNode, err := openState(ctx, o.DataDir, company, log, fleet)
	if err != nil {
		fleet.close()
		return err
	}
	// Closed in this order: the hub (every child stopped), the fleet (every
	// seat let go, once nothing acts for it here), the state.
	defer closeNode()
	defer fleet.close()

	hopts := hub.Options{
		Company:    company,
		Env:        src.env,
		Logger:     log,
		Reload:     src.load,
		Redact:     src.storedValues,
		ConfigFile: o.ConfigFile,
		FirstParty: firstParty(node),
		Sanitizer:  clean,
		Ledger:     ledger,
	}
	if fleet != nil {
		hopts.Fleet = fleet.hubFleet()
	}
	h, err := hub.New(ctx, hopts)
	if err != nil {
		return err
	}
	defer h.Close()

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if err := os.WriteFile(filepath.Join(o.DataDir, "listen-addr"), []byte(addr+"\n"), 0o600); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	var wg conc.WaitGroup
	defer wg.Wait()
	wg.Go(func() { served <- srv.Serve(ln) })

	log.Info("hub_listening", "addr", addr, "mcp_url", "http://"+addr+"/operator/mcp", "data_dir", o.DataDir)
	fleetNote := ""
	if fleet != nil {
		fleetNote = fmt.Sprintf("%s (%d copies of the log)", o.Fleet.Cluster.Node, fleet.js.Replicas())
	}
	banner(o.Stdout, addr, src.tokenNote(), fleetNote)

	for {
		select {
		case <-o.Reload:
			if err := h.Reload(); err != nil {
				log.Error("config_reload_failed", "error", err.Error())
			}
		case err := <-served:
			return err
		case <-ctx.Done():
			log.Info("hub_stopping")
			shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Open sessions hold long-lived streams: close them first so
			// Shutdown does not wait on them.
			h.Close()
			if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
}

// banner says where the hub is and where its token is, never the token.
// The endpoint line is printed last: scripts wait for it.
func banner(w io.Writer, addr, tokenNote, fleetNote string) {
	fmt.Fprintf(w, "Crewlet hub %s listening on %s\n", hub.Version, addr)
	if tokenNote != "" {
		fmt.Fprintf(w, "  operator token: %s (send it as Authorization: Bearer <token>)\n", tokenNote)
	}
	if fleetNote != "" {
		fmt.Fprintf(w, "  fleet node: %s\n", fleetNote)
	}
	fmt.Fprintf(w, "  MCP endpoint: http://%s/operator/mcp\n", addr)
}
