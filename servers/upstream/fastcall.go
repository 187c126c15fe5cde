//lint:file-ignore SA1019 a hub answers sampling and roots requests (deprecated in 2026-07-28, SEP-2577) for servers of the session revisions, which still send them.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path of a tool call: the request is written by the hub itself,
// its arguments the bytes the caller sent, and the answer handed back as
// the JSON the server wrote, for the hub to sanitise in one pass. The SDK's
// session stays in place for everything else (the handshake, lists,
// resources, the server's notifications and requests) and for what the fast
// path leaves to it: a tool whose arguments travel in HTTP headers, and a
// result that asks the client for input (the SDK's client fulfils it and
// calls again).

// link carries fast calls to a server over the connection in place.
type link interface {
	// call sends one tools/call request, id its JSON-RPC id, and returns
	// the JSON-RPC response's result, or the *jsonrpc.Error it carried.
	// A link that broke under the call answers errLinkBroken.
	call(ctx context.Context, id, name string, req []byte) (json.RawMessage, error)
	// cancel tells the server the request id is cancelled.
	cancel(id, reason string)
}

// errLinkBroken is a fast call whose connection failed after the request
// was sent.
var errLinkBroken = errors.New("the connection to the server broke during the call")

// linkSetup is what a fast link needs of the session the SDK opened:
// the revision it speaks and, from 2026-07-28 on, the _meta every request
// carries (the protocol version, the client's identity and capabilities),
// as the SDK's client wrote it on its own requests.
type linkSetup struct {
	version string
	meta    []byte // the members of that _meta, braces stripped; nil before 2026-07-28
}

// fastIDs numbers fast calls; the ids never collide with the SDK's, which
// are integers.
var fastIDs atomic.Int64

// CallRaw runs a tool as Call does, answering the result as the JSON the
// server wrote (raw), or, where the SDK's client made the call, the result
// it decoded (res). Every call sent is told to the instance's HopObserver,
// on whichever path it went.
func (i *Instance) CallRaw(ctx context.Context, name string, args json.RawMessage) (raw json.RawMessage, res *mcp.CallToolResult, err error) {
	i.mu.Lock()
	sess, recorded, lk, setup, slow := i.sess, i.recorded, i.fast, i.fastSetup, i.viaSDK[name]
	i.mu.Unlock()
	if sess != nil && (lk == nil || slow) {
		res, err := i.Call(ctx, name, args)
		return nil, res, err
	}
	hopCtx, hopDone := i.opts.Hops.HopStarted(ctx, i.opts.Spec.Name, name)
	raw, err = i.callFast(hopCtx, sess, recorded, lk, setup, name, args)
	if errors.Is(err, errAsksForInput) {
		// The server needs the client's input before it answers: the
		// SDK's client fulfils that and calls again, a hop of its own.
		hopDone(nil)
		res, err := i.Call(ctx, name, args)
		return nil, res, err
	}
	hopDone(err)
	return raw, nil, err
}

// errAsksForInput is a fast call whose result asks the client for input.
var errAsksForInput = errors.New("the result asks the client for input")

func (i *Instance) callFast(ctx context.Context, sess *mcp.ClientSession, recorded chan struct{}, lk link, setup linkSetup, name string, args json.RawMessage) (json.RawMessage, error) {
	if sess == nil {
		return nil, i.downError(false)
	}
	if err := ctx.Err(); err != nil {
		// As the SDK's client: nothing is sent on an ended context.
		return nil, err
	}
	f := i.flights.add(downstreamFrom(ctx))
	defer i.flights.remove(f)
	id := "crewlet-fast-" + strconv.FormatInt(fastIDs.Add(1), 10)
	raw, err := lk.call(ctx, id, name, toolsCall(id, name, args, f.token, setup.meta))
	if err == nil {
		if askingForInput(raw) {
			return nil, errAsksForInput
		}
		return raw, nil
	}
	if ctx.Err() != nil {
		// As the SDK's client does: the server is told, off the caller's
		// way (the instance owns the telling, bounded in time), and the
		// caller gets its context's error.
		reason := ctx.Err().Error()
		i.wg.Go(func() { lk.cancel(id, reason) })
		return nil, ctx.Err()
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return nil, err
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The remote could not be reached: its session is as good as
		// ended. End it, so the death watch restarts it on the schedule.
		// A call that never got a connection was not sent.
		var op *net.OpError
		sent := !(errors.As(err, &op) && op.Op == "dial")
		_ = sess.Close()
		waitRecorded(recorded)
		return nil, i.downError(sent)
	}
	if errors.Is(err, errSessionGone) {
		_ = sess.Close()
		waitRecorded(recorded)
		return nil, i.downError(true)
	}
	if errors.Is(err, errLinkBroken) {
		waitRecorded(recorded)
		return nil, i.downError(true)
	}
	return nil, err
}

// waitRecorded gives the death watch a moment to record a session's end,
// so the answer says what took the server down.
func waitRecorded(recorded chan struct{}) {
	select {
	case <-recorded:
	case <-time.After(2 * time.Second):
	}
}

// toolsCall writes a tools/call request: the arguments as they came, the
// progress token the hub gave the call, and the _meta a 2026-07-28 request
// carries.
func toolsCall(id, name string, args json.RawMessage, token string, meta []byte) []byte {
	b := make([]byte, 0, 96+len(name)+len(args)+len(meta))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...)
	b = append(b, `","method":"tools/call","params":{"name":`...)
	b = rawjson.AppendString(b, name)
	if len(args) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, args...)
	}
	if token != "" || len(meta) > 0 {
		b = append(b, `,"_meta":{`...)
		if token != "" {
			b = append(b, `"progressToken":`...)
			b = rawjson.AppendString(b, token)
			if len(meta) > 0 {
				b = append(b, ',')
			}
		}
		b = append(b, meta...)
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

// askingForInput reports a result that asks the client for input
// (2026-07-28 multi round-trip requests).
func askingForInput(raw []byte) bool {
	asks := false
	_ = rawjson.Members(raw, func(key, _, val []byte) error {
		switch string(key) {
		case "inputRequests":
			asks = asks || string(val) != "null"
		case "resultType":
			asks = asks || string(val) == `"input_required"`
		}
		return nil
	})
	return asks
}

// response reads a JSON-RPC response: its id, and its result or error.
// isResponse is false for a request or a notification.
func response(msg []byte) (id []byte, result json.RawMessage, rpcErr *jsonrpc.Error, isResponse bool, err error) {
	var errRaw []byte
	var method bool
	err = rawjson.Members(msg, func(key, _, val []byte) error {
		switch string(key) {
		case "id":
			id = val
		case "result":
			result = val
		case "error":
			errRaw = val
		case "method":
			method = true
		}
		return nil
	})
	if err != nil || method {
		return nil, nil, nil, false, err
	}
	if errRaw != nil {
		rpcErr = new(jsonrpc.Error)
		if uerr := json.Unmarshal(errRaw, rpcErr); uerr != nil {
			return nil, nil, nil, false, fmt.Errorf("reading the server's error: %w", uerr)
		}
		return id, nil, rpcErr, true, nil
	}
	return id, result, nil, result != nil, nil
}

// metaMembers reads, from the params of a request the SDK's client wrote,
// the _meta members a fast request must carry too. nil when there are
// none (a session revision).
func metaMembers(params []byte) []byte {
	var meta []byte
	_ = rawjson.Members(params, func(key, _, val []byte) error {
		if string(key) == "_meta" {
			meta = val
		}
		return nil
	})
	if len(meta) < 2 {
		return nil
	}
	out := []byte{}
	_ = rawjson.Members(meta, func(key, keyRaw, val []byte) error {
		if string(key) == "progressToken" {
			return nil
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, keyRaw...), ':'), val...)
		return nil
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// serverRequest answers a request a server sends while a fast call runs on
// a session revision, as the SDK's client would answer it: through the
// client of the call in flight.
func (i *Instance) serverRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "ping":
		return struct{}{}, nil
	case "sampling/createMessage":
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return i.sample(ctx, &p)
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return i.elicit(ctx, &p)
	case "roots/list":
		var p mcp.ListRootsParams
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
		}
		return i.roots(ctx, &p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
}

// reply writes the response to a server's request.
func reply(id []byte, result any, err error) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	if err != nil {
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			wire = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		e, _ := json.Marshal(wire)
		b = append(append(b, `,"error":`...), e...)
		return append(b, '}')
	}
	r, merr := json.Marshal(result)
	if merr != nil {
		e, _ := json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()})
		return append(append(append(b, `,"error":`...), e...), '}')
	}
	b = append(append(b, `,"result":`...), r...)
	return append(b, '}')
}
