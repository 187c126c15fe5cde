package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// trackerMCP runs the native tracker on its own, over stdio or streamable
// HTTP, for developing and testing it with any MCP client. It behaves as
// the hub's mounted tracker does; it believes the caller named in a call's
// metadata only from a client presenting the trusted caller's token.
func trackerMCP(args []string) error {
	fs := flag.NewFlagSet("tracker-mcp", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address instead of stdio; port 0 picks one (written to DIR/listen-addr)")
	dataDir := fs.String("data-dir", "./.crewlet-tracker", "the tracker's own data directory")
	cfgPath := fs.String("config", "", "company file for the directory of seats and units; the embedded default without one")
	trustEnv := fs.String("trusted-caller-env", "CREWLET_TRUSTED_CALLER", "environment variable holding the token a trusted caller presents (in _meta crewlet/proof, or as the HTTP bearer token)")
	debug := fs.Bool("debug", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(*debug)
	proof := os.Getenv(*trustEnv)
	if proof == "" {
		// Refused rather than run trusting nobody: every call would be
		// refused, which looks like a broken tracker.
		return fmt.Errorf("set %s to the token the trusted caller presents", *trustEnv)
	}
	company := config.Default()
	if *cfgPath != "" {
		c, err := loadCompany(*cfgPath)
		if err != nil {
			return err
		}
		company = c
	}
	dir := company.Directory()
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	node, err := state.Open(ctx, state.Options{Dir: filepath.Join(*dataDir, "state"), Logger: log, Projectors: tracker.Projectors()})
	if err != nil {
		return fmt.Errorf("opening the tracker's state: %w", err)
	}
	defer node.Close()
	server := tracker.NewServer(tracker.Deps{Node: node, Directory: func() *authority.Directory { return dir }, Logger: log}, servers.TrustProof(proof))

	if *httpAddr == "" {
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if err := os.WriteFile(filepath.Join(*dataDir, "listen-addr"), []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("tracker MCP server on http://%s/\n", addr)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
