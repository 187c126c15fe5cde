package servers

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Direct holds the handlers of a server's tools for a caller in the same
// process: the hub, which runs its first-party servers in its own process,
// calls a tool's handler as a function instead of writing the call to an
// in-memory connection and reading the answer back, twice through JSON.
// The handler is the very one the server registered with the SDK (a
// standalone server, and every listing, still go through the SDK), given
// the request the SDK would have given it: the caller and the in-process
// proof in its _meta, judged by the server's own trust. So the decisions
// and the answers are the same, without the wire.
//
// Register files each tool of a server made with an in-process trust
// (InProcess) here. A Direct is safe for concurrent use.
type Direct struct {
	proof string
	mu    sync.RWMutex
	tools map[string]mcp.ToolHandler
}

// InProcess returns a trust for a server the hub runs in its own process,
// with a random proof that never leaves it, and the Direct in which
// Register files the server's tools.
func InProcess() (Trust, *Direct) {
	trust, proof := InProcessTrust()
	d := &Direct{proof: proof, tools: map[string]mcp.ToolHandler{}}
	trust.direct = d
	return trust, d
}

// Proof is the proof the trust of this Direct's server takes, for calls
// made to it over a connection.
func (d *Direct) Proof() string { return d.proof }

func (d *Direct) add(name string, h mcp.ToolHandler) {
	d.mu.Lock()
	d.tools[name] = h
	d.mu.Unlock()
}

// Has reports whether a tool can be called directly.
func (d *Direct) Has(name string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.tools[name]
	return ok
}

// Call runs a tool for caller with the arguments as they came. ok is false
// for a tool not registered through the kit, which only a connection
// reaches.
func (d *Direct) Call(ctx context.Context, caller authority.Caller, name string, args json.RawMessage) (res *mcp.CallToolResult, ok bool, err error) {
	d.mu.RLock()
	h, ok := d.tools[name]
	d.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args, Meta: CallerMeta(caller, d.proof)}}
	// Every kit handler answers with content (a result or a refusal), so
	// there is nothing to fill in that the SDK would have.
	res, err = h(ctx, req)
	return res, true, err
}
