package serve

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openState opens the node's durable log and projection for the native
// tracker, only when the company runs it: a company on a vendor tracker
// gets no tracker tools at all (CAT-4). The returned func closes it.
func openState(ctx context.Context, dataDir string, c *config.Company, log *slog.Logger) (*state.Node, func(), error) {
	if c.TrackerBackend() != "native" {
		return nil, func() {}, nil
	}
	node, err := state.Open(ctx, state.Options{
		Dir:        filepath.Join(dataDir, "state"),
		Logger:     log.With("component", "state"),
		Projectors: tracker.Projectors(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("opening the node's state: %w", err)
	}
	return node, func() { _ = node.Close() }, nil
}

// firstParty lists the servers the hub mounts in-process: the engine's
// builtins always, the native tracker (with its search index) where the
// node has its state.
func firstParty(node *state.Node, index *search.Index) []hub.FirstParty {
	return []hub.FirstParty{{
		Name: "builtins",
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return agent.NewBuiltinServer(d.Directory, t, d.Logger)
		},
	}, {
		Name:    "tracker",
		Enabled: func(c *config.Company) bool { return node != nil && c.TrackerBackend() == "native" },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger, Search: index}, t)
		},
	}}
}
