package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/cmd/internal/cli"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/serve"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/standalone"
	"github.com/crewlet/hub/tracker-mcp"
)

// standaloneServers are the first-party servers that run on their own, by
// command name (crewlet tracker-mcp, ...).
var standaloneServers = map[string]standalone.Server{
	"tracker-mcp":   tracker.Standalone,
	"knowledge-mcp": knowledge.Standalone,
	"artifacts-mcp": artifacts.Standalone,
}

// standaloneCommand is `crewlet tracker-mcp` and its siblings: one
// first-party server on its own (servers/standalone).
func standaloneCommand(name string) *cli.Command {
	srv := standaloneServers[name]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	args := standalone.Flags(fs, srv.Name)
	return &cli.Command{
		Name:  name,
		Flags: fs,
		Summary: "Run the " + srv.Name + " server on its own, over stdio (or streamable HTTP with --http), " +
			"for any MCP client; $CREWLET_TRUSTED_CALLER or --as says who calls.",
		Run: func([]string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return standalone.Serve(ctx, srv, *args, standalone.Options{Directory: companyDirectory, Embedder: companyEmbedder})
		},
	}
}

// companyEmbedder is the company file's embeddings model, its variables
// read from the environment (the standalone server has no secret store);
// nil for the embedded company, which names none.
func companyEmbedder(path string, getenv func(string) string) (search.Embedder, error) {
	c := config.Default()
	if path != "" {
		var err error
		if c, err = loadCompany(path); err != nil {
			return nil, err
		}
	}
	return serve.Embedder(c, func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	})
}

// companyDirectory is the seats and units of a company file, or of the
// embedded default company when path is empty.
func companyDirectory(path string) (*authority.Directory, error) {
	if path == "" {
		return config.Default().Directory(), nil
	}
	c, err := loadCompany(path)
	if err != nil {
		return nil, err
	}
	return c.Directory(), nil
}
