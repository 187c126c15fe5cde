package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openState opens the node's durable log and projection. Every company
// has artifacts, so every node opens it, whatever tracker and knowledge
// base the company runs; the one log holds all of them, and the
// projectors of all of them are registered, so a log written under one
// revision replays under any other. The returned func closes it. In a
// fleet the log is the fleet's shared one (the node projects it into its
// own store, FLT-3), its blobs are the fleet's, and a seat's own writes
// are fenced on the seat's lease.
func openState(ctx context.Context, dataDir string, log *slog.Logger, fleet *fleetConn) (*state.Node, func(), error) {
	opts := state.Options{
		Dir:        filepath.Join(dataDir, "state"),
		Logger:     log.With("component", "state"),
		Projectors: slices.Concat(tracker.Projectors(), knowledge.Projectors(), artifacts.Projectors(), agent.Projectors(), toolpin.Projectors()),
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

// takesUploads reports whether the node can take artifact uploads (CAT-5):
// a data node, an object store and a coordination store. Only the last is
// probed: the data node is node itself (nil: none), and a node this
// package opens has its object store or did not open (openState: the
// embedded log's own, or the fleet's). The coordination store is a TTL
// bucket on the node's JetStream, which a node on another log lacks; the
// probe keeps the artifact tools off such a node.
func takesUploads(ctx context.Context, node *state.Node) bool {
	if node == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := node.TTLBucket(ctx, "CREWLET_ARTIFACT_ROOMS")
	return err == nil
}

// artifactDeps is what the artifact store is given on this node: the
// company's policy read per call, the hub's address once it listens, and
// the engine's dashboard sources (ART-1).
func artifactDeps(node *state.Node, d hub.Deps, baseURL func() string) artifacts.Deps {
	return artifacts.Deps{Node: node, Directory: d.Directory, Logger: d.Logger, BaseURL: baseURL,
		ManageOthers: func() bool { c := d.Company(); return c != nil && c.Artifacts.AgentsManageOthers },
		Sources:      engineSources{company: d.Company, directory: d.Directory}}
}

// firstParty lists the servers the hub mounts in-process: the engine's
// builtins (with search_knowledge where the company's knowledge base is a
// vendor's) and a person's decisions about seats always (the decisions act
// on the runtime once it has started), answer_knowledge where the node
// holds the tracker or the knowledge base, the native tracker and knowledge base (each with its
// search index) where the company runs them, and the artifact store where
// the node takes uploads.
func firstParty(node *state.Node, ix indexes, uploads bool, baseURL func() string, builtins agent.BuiltinDeps, runtime func() *agent.Runtime,
	answers func(hub.Deps) agent.AnswerDeps, started func() *hub.Hub, company *config.Company) []hub.FirstParty {
	// A vendor's knowledge base is searched through its own MCP server, as
	// the caller (KB-3); the native one's search is the knowledge server's.
	// Which one the company runs is read as the servers below are enabled:
	// from the revision the node started with.
	builtins.Knowledge = agent.NewVendorKnowledge(company.KnowledgeBackend(), through(started).offered, through(started).call)
	builtins.Episodes = ix.episodes
	return []hub.FirstParty{{
		Name: "builtins",
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			builtins.Directory = d.Directory
			// A recalled turn's long ask or account is condensed by the
			// seat's auxiliary model, charged to the seat (OUT-2).
			aux := answers(d)
			builtins.Condense = agent.NewCondenser(agent.AuxiliaryDeps{Model: aux.Model, Runtime: aux.Runtime}).Condense
			return agent.NewBuiltinServer(builtins, t, d.Logger)
		},
	}, {
		Name: "decisions",
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return agent.NewDecisionServer(agent.DecisionDeps{Directory: d.Directory, Runtime: runtime, Relay: seatRelay{started}}, t, d.Logger)
		},
	}, {
		Name: "answers",
		Enabled: func(c *config.Company) bool {
			return node != nil && (c.TrackerBackend() == "native" || c.KnowledgeBackend() == "native")
		},
		New: func(t servers.Trust, d hub.Deps) *mcp.Server { return agent.NewAnswerServer(answers(d), t, d.Logger) },
	}, {
		Name:    "tracker",
		Enabled: func(c *config.Company) bool { return node != nil && c.TrackerBackend() == "native" },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger, Search: ix.tracker}, t)
		},
	}, {
		Name:    "knowledge",
		Enabled: func(c *config.Company) bool { return node != nil && c.KnowledgeBackend() == "native" },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			return knowledge.NewServer(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger, Search: ix.knowledge}, t)
		},
	}, {
		Name:    "artifacts",
		Enabled: func(*config.Company) bool { return uploads },
		New: func(t servers.Trust, d hub.Deps) *mcp.Server {
			// A long file read without an offset is condensed by the
			// reader's auxiliary model, charged to their seat (OUT-2).
			deps, aux := artifactDeps(node, d, baseURL), answers(d)
			if builtins.Sandbox != nil {
				deps.Builds = runBuilds(runtime)
			}
			deps.Condense = agent.NewCondenser(agent.AuxiliaryDeps{Model: aux.Model, Runtime: aux.Runtime}).Condense
			return artifacts.NewServer(deps, t)
		},
	}}
}

// toolSkills are the bundled tool skills whose tools this node registers:
// skill:artifacts where it takes uploads (ART-9).
func toolSkills(uploads bool) []agent.ToolSkill {
	return agent.BundledToolSkills(func(string) bool { return uploads })
}

// artifactFiles is the file route's reader where the node takes uploads.
func artifactFiles(node *state.Node, uploads bool, baseURL func() string) func(hub.Deps) hub.ArtifactFiles {
	if !uploads {
		return nil
	}
	return func(d hub.Deps) hub.ArtifactFiles { return artifacts.NewStore(artifactDeps(node, d, baseURL)) }
}

// pageTrash is the dashboard's trash of pages where the node keeps state;
// the hub serves it while the native knowledge base is served (ART-4).
func pageTrash(node *state.Node) func(hub.Deps) hub.PageTrash {
	if node == nil {
		return nil
	}
	return func(d hub.Deps) hub.PageTrash {
		return knowledge.NewStore(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger})
	}
}

// answerDeps is what answer_knowledge is given on this node: the asker's
// auxiliary model from the revision in force, searches through the hub as
// the asker once the hub has started, and the runtime (its budget and
// its store) once the runtime has.
func answerDeps(node *state.Node, env config.Lookup, started func() *hub.Hub, running func() *agent.Runtime) func(hub.Deps) agent.AnswerDeps {
	return func(d hub.Deps) agent.AnswerDeps {
		return agent.AnswerDeps{
			Runtime: running,
			Model:   auxiliaryModel(d.Company, env),
			Search:  through(started).call,
			Pages:   func() bool { return node != nil && d.Company().KnowledgeBackend() == "native" },
			Board:   func() bool { return node != nil && d.Company().TrackerBackend() == "native" },
		}
	}
}

// auxiliaryModel reads a seat's auxiliary model from the revision in
// force, per call (models.auxiliary, else the seat's own).
func auxiliaryModel(company func() *config.Company, env config.Lookup) func(seat string) (agent.ModelSpec, bool, error) {
	return func(seat string) (agent.ModelSpec, bool, error) {
		spec, ok, err := company().AuxiliaryModel(seat, env)
		if err != nil || !ok {
			return agent.ModelSpec{}, ok, err
		}
		return agent.ModelSpec{API: spec.API, Provider: spec.Provider, BaseURL: spec.BaseURL, APIKey: spec.APIKey,
			Model: spec.Model, MaxOutputTokens: spec.MaxOutputTokens}, true, nil
	}
}

// through reaches tools through the hub once it has started, as the
// caller, in the registry the caller is offered: a seat's own, which
// holds its per-role servers, else the company's.
type through func() *hub.Hub

func registryOf(h *hub.Hub, c authority.Caller) hub.Registry {
	if c.Kind == authority.KindAgent {
		return h.SeatRegistry(c.Seat)
	}
	return hub.CompanyRegistry(h.Catalogue())
}

func (t through) offered(c authority.Caller) []agent.OfferedTool {
	h := t()
	if h == nil {
		return nil
	}
	var out []agent.OfferedTool
	for _, e := range registryOf(h, c).Entries() {
		out = append(out, agent.OfferedTool{Name: e.Name, Source: string(e.Source)})
	}
	return out
}

func (t through) call(ctx context.Context, c authority.Caller, tool string, args map[string]any) *mcp.CallToolResult {
	h := t()
	if h == nil {
		return servers.Refused(authority.Refuse(authority.Unavailable, "The hub is still starting; ask again in a moment."))
	}
	b, _ := json.Marshal(args)
	return h.Router().Call(ctx, registryOf(h, c), c, tool, b)
}
