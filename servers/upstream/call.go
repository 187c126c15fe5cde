package upstream

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call runs a tool on the server, answering its result decoded, for a
// caller that reads it rather than forwarding it. It is CallRaw's call.
func (i *Instance) Call(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	raw, _, err := i.CallRaw(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &UnreadableError{Server: i.opts.Spec.Name, Why: "a result that is not a tool's result: " + err.Error()}
	}
	return &res, nil
}

func (i *Instance) downError(inFlight bool) *DownError {
	i.mu.Lock()
	defer i.mu.Unlock()
	e := &DownError{Server: i.opts.Spec.Name, Cause: i.status.Cause, NextRestart: i.status.NextRestart, InFlight: inFlight}
	switch {
	case e.Cause != "":
	case i.status.State == StateStopped:
		e.Cause = "it was stopped"
	case i.status.State == StateStarting:
		e.Cause = "it is still starting"
	default:
		e.Cause = "its session ended"
	}
	return e
}
