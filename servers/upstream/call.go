package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call runs a tool on the server.
func (i *Instance) Call(ctx context.Context, name string, args json.RawMessage) (_ *mcp.CallToolResult, err error) {
	ctx, hopDone := i.opts.Hops.HopStarted(ctx, i.opts.Spec.Name, name)
	defer func() { hopDone(err) }()
	i.mu.Lock()
	sess, recorded := i.sess, i.recorded
	i.mu.Unlock()
	if sess == nil {
		return nil, i.downError(false)
	}
	var a any
	if len(args) > 0 {
		a = args
	}
	params := &mcp.CallToolParams{Name: name, Arguments: a}
	f := i.flights.add(ctx, downstreamFrom(ctx))
	defer i.flights.remove(f)
	if f.token != "" {
		params.SetProgressToken(f.token)
	}
	res, err := sess.CallTool(ctx, params)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The remote could not be reached: its session is as good as
		// ended. End it, so the death watch restarts it on the schedule,
		// and say so in the engine's words. A call that never got a
		// connection was not sent.
		var op *net.OpError
		sent := !(errors.As(err, &op) && op.Op == "dial")
		_ = sess.Close()
		select {
		case <-recorded:
		case <-time.After(2 * time.Second):
		}
		return nil, i.downError(sent)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		// The server answered, with a protocol error of its own.
		return nil, err
	}
	// The connection failed under the call: give the death watch a moment
	// to record it, so the answer says what took the server down.
	select {
	case <-recorded:
	case <-time.After(2 * time.Second):
	}
	return nil, i.downError(true)
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
