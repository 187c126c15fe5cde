package serve

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openState opens the node's durable log and projection for the native
// tracker and knowledge base, only when the company runs one of them: a
// company on vendor backends gets none of their tools (CAT-4). The one log
// holds both; the returned func closes it. In a fleet the log is the
// fleet's shared one (the node projects it into its own store, FLT-3), its
// blobs are the fleet's, and a seat's own writes are fenced on the seat's
// lease.
func openState(ctx context.Context, dataDir string, c *config.Company, log *slog.Logger, fleet *fleetConn) (*state.Node, func(), error) {
	if c.TrackerBackend() != "native" && c.KnowledgeBackend() != "native" {
		return nil, func() {}, nil
	}
	opts := state.Options{
		Dir:        filepath.Join(dataDir, "state"),
		Logger:     log.With("component", "state"),
		Projectors: append(tracker.Projectors(), knowledge.Projectors()...),
	}
	if fleet != nil {
		blobs, err := fleet.js.Blobs(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the fleet's blob store: %w", err)
		}
		opts.Log, opts.Blobs, opts.Fence, opts.Shared = fleet.js, blobs, fleet.leases.FenceOp, true
		// The node takes the log over, and closes it, from here on, even
		// when it fails to open.
		fleet.logOwned = true
	}
	node, err := state.Open(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the node's state: %w", err)
	}
	return node, func() { _ = node.Close() }, nil
}

// firstParty lists the servers the hub mounts in-process: the engine's
// builtins always, the native tracker and knowledge base where the company
// runs them and the node has its state.
func firstParty(node *state.Node) []hub.FirstParty {
	return []hub.FirstParty{{
		Name: "builtins",
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return agent.NewBuiltinServer(d.Directory, t, d.Logger)
		},
	}, {
		Name:    "tracker",
		Enabled: func(c *config.Company) bool { return node != nil && c.TrackerBackend() == "native" },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, t)
		},
	}, {
		Name:    "knowledge",
		Enabled: func(c *config.Company) bool { return node != nil && c.KnowledgeBackend() == "native" },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return knowledge.NewServer(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, t)
		},
	}}
}
