package serve

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/sandbox"
)

// Coding runs on this node: run_sandbox's boxes are made under the data
// directory's boxes/ (only a box's own workspace is bound into it), and
// source.sandbox reads the box of the caller's turn's run through the
// runtime.

// codingRuns is where this node makes coding runs' boxes, or nil where
// it can have none (no bwrap): run_sandbox is then not registered (CAT-3).
// The boxes a node stopped without removing are swept here, workspaces
// and cgroups (sandbox.Sweep): their runs end unknown when their seats
// are next held, and are never run again.
func codingRuns(dataDir string, company func() *config.Company, log *slog.Logger) *agent.Sandbox {
	if _, err := sandbox.Find(); err != nil {
		return nil
	}
	dir := filepath.Join(dataDir, "boxes")
	if err := sandbox.Sweep(dir); err != nil {
		log.Warn("boxes_not_removed", "dir", dir, "error", err.Error())
	}
	// Each run's box is made as the revision in force says: a reload is
	// seen by the next run.
	return &agent.Sandbox{Dir: dir, Config: func() sandbox.Config { return company().SandboxConfig() },
		Env: func() []string { return sandbox.Env(os.Environ(), nil) }}
}

// runBuilds is source.sandbox's way to the runtime's boxes, once the
// runtime has started.
type runBuilds func() *agent.Runtime

func (r runBuilds) Build(c authority.Caller) artifacts.BuildBox {
	rt := r()
	if rt == nil {
		return nil
	}
	if box := rt.BuildBox(c); box != nil {
		return box
	}
	return nil
}

// inForce is the company revision in force: the hub's once it has
// started, else the one the node started with.
func inForce(started func() *hub.Hub, first *config.Company) func() *config.Company {
	return func() *config.Company {
		if h := started(); h != nil {
			return h.Company()
		}
		return first
	}
}
