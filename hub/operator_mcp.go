//lint:file-ignore SA1019 a hub forwards logging and sampling (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package hub

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/crewlet/hub/hub/throttle"
	"net/http"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newOperator builds the operator catalogue's MCP server and its handlers.
func newOperator(d operatorDeps) *operator {
	f := &operator{operatorDeps: d, owned: newOwners(), subs: map[string]int{}, refusals: newRefusalLog(d.log, refusalLogEvery), wrong: throttle.NewCredentials(nil),
		sessions: newSessionTable(d.opts.SessionIdle, d.opts.SessionGrace), sessionIDs: sessionIDs{key: d.sessionKey},
		impl: &mcp.Implementation{Name: "crewlet", Title: "Crewlet hub", Version: Version}}
	f.serverInfo, _ = json.Marshal(f.impl)
	f.sessions.closed = f.sessionClosed
	f.server = mcp.NewServer(f.impl, &mcp.ServerOptions{
		Instructions: "The Crewlet hub's operator catalogue: the company's builtin tools and its MCP servers' tools, decided by your bearer token on every call.",
		Logger:       quiet(d.log).With("component", "operator_mcp"),
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return f.complete(ctx, req)
		},
		SetCacheable: cacheScope,
		// Signed, so that any node of a fleet knows an id the fleet
		// issued (mcp_sessions_fleet.go).
		GetSessionID:       f.sessionIDs.mint,
		SubscribeHandler:   func(ctx context.Context, req *mcp.SubscribeRequest) error { return f.subscribe(ctx, req) },
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error { return f.unsubscribe(ctx, req) },
	})
	f.server.AddReceivingMiddleware(dropRequestHeader, f.callMiddleware, codedErrors, f.sessionMiddleware)
	f.syncTools()
	// Both revisions are served fully only by two handlers behind one route:
	// the SDK speaks 2026-07-28 only statelessly, and only a stateful
	// handler can push list_changed or forward server-to-client requests to
	// a 2025 client.
	get := func(*http.Request) *mcp.Server { return f.server }
	opts := func(stateless bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			Logger:              quiet(d.log).With("component", "operator_http"),
			MaxRequestBodyBytes: d.opts.MaxBodyBytes,
			// Host and Origin are checked by guard for every route,
			// including non-loopback listeners with allowed names.
			DisableLocalhostProtection: true,
			// A 2025 session a client stopped using is closed, not kept
			// (and notified of every catalogue change) for ever: by the
			// hub's own timer (mcp_sessions.go), since the fast path
			// answers calls the SDK never sees.
			// A 2026-07-28 request is its whole exchange: a client that
			// hangs up has given up on the call, so it ends, and the
			// server behind it is told to cancel it.
			PropagateRequestCancellation: true,
		}
	}
	// The fast path needs nothing of the SDK's authentication; only what
	// reaches the SDK goes through it.
	f.stateful = f.sdkAuth(mcp.NewStreamableHTTPHandler(get, opts(false)))
	f.stateless = f.sdkAuth(mcp.NewStreamableHTTPHandler(get, opts(true)))
	return f
}

// cacheScope says who may cache a 2026-07-28 list or read (its cacheScope;
// issue 36, finding 11). Every answer of /operator/mcp is given to a
// bearer token, and those of the lists and reads depend on it: the
// catalogue is the company's as that credential is offered it, and a
// server's resources and prompts are read through links that can carry a
// seat's own credentials. A cache shared by several callers must never
// hand one caller's answer to another, so they are private, whatever the
// server behind wrote. server/discover alone is public: its answer is the
// hub's capabilities, revisions and instructions, built from the hub's
// options alone, the same for any caller.
func cacheScope(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	if _, discover := req.(*mcp.ServerRequest[*mcp.DiscoverParams]); discover {
		c.CacheScope = "public"
		return
	}
	c.CacheScope = "private"
}

// syncTools mirrors the catalogue into the SDK server, which is what lists
// tools to clients and pushes tools/list_changed when the set moves (MCP-8).
func (f *operator) syncTools() {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := CompanyRegistry(f.company).Entries()
	now := map[string]string{}
	for _, e := range entries {
		key := sdkKey(e)
		now[e.Name] = key
		if f.synced[e.Name] == key {
			continue
		}
		f.server.AddTool(sdkTool(e), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Unreachable in practice: callMiddleware answers every
			// tools/call. Kept so the SDK never answers one by itself.
			return f.call(ctx, req), nil
		})
	}
	var gone []string
	for name := range f.synced {
		if _, ok := now[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		f.server.RemoveTools(gone...)
	}
	f.synced = now
}

// sdkKey identifies what a client would see of a tool, so an unchanged tool
// is not re-added (which would notify every client for nothing).
func sdkKey(e Entry) string {
	b, _ := json.Marshal(sdkTool(e))
	return string(b)
}

func sdkTool(e Entry) *mcp.Tool {
	t := &mcp.Tool{
		Name:        e.Name,
		Description: e.Description,
		InputSchema: json.RawMessage(e.InputSchema),
		Annotations: servers.Annotations(e.Hints),
		Meta: mcp.Meta{
			servers.MetaSource:   string(e.Source),
			servers.MetaHints:    e.Hints,
			servers.MetaDelivers: e.Delivers,
		},
	}
	if len(e.OutputSchema) > 0 {
		t.OutputSchema = json.RawMessage(e.OutputSchema)
	}
	return t
}

// callMiddleware answers every tools/call itself, so an unknown tool is a
// not_found refusal rather than the SDK's protocol error (REF-5), and so each
// call is decided by the credential of the request carrying it (OPS-1).
func (f *operator) callMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		return f.call(ctx, ctr), nil
	}
}

// dropRequestHeader lets go of a request's HTTP header once the request is
// answered. The SDK keeps the last message a session received reachable for
// as long as the session lives (its handler queue's backing array still
// points at it), and through it the header of that message's POST: about
// 1 KiB of every idle session, most often its initialized notification's.
// Nothing reads the header after the handlers have returned.
func dropRequestHeader(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if ex := req.GetExtra(); ex != nil {
			ex.Header = nil
		}
		return res, err
	}
}

// codedErrors gives every error a method answers a JSON-RPC code. The SDK
// sends an error that carries none with code 0, which is no code a client
// can act on: an error of the hub's own that does not say what went wrong
// with the request is the hub's, an internal error.
func codedErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var wire *jsonrpc.Error
		if err != nil && !errors.As(err, &wire) {
			err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		return res, err
	}
}

func (f *operator) call(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	p, ok := principalOf(req.Extra)
	if !ok {
		// The HTTP layer refuses a request without a valid token before
		// the SDK sees it; this is the belt to that brace.
		return servers.Refused(authority.Refuse(authority.Forbidden, "This call carries no operator credential."))
	}
	var args json.RawMessage
	if req.Params != nil {
		args = req.Params.Arguments
	}
	// Log lines, progress and requests an upstream server sends while it
	// serves the call go back to this session.
	modern := false
	if req.Session != nil {
		modern = takesInputRounds(req.Session)
		ctx = upstream.WithDownstream(ctx, cleanDownstream(f.router.clean, f.log, sessionDownstream{ss: req.Session, token: progressTokenOf(req), caller: p.TokenID, call: ctx, modern: modern}))
		if modern {
			// A server's input requests go to the client in the answer,
			// and the client's answers come back in a call like this one
			// (input_rounds.go); on a session they mean nothing.
			ctx = withClientRound(ctx, &clientRound{responses: req.Params.InputResponses, state: req.Params.RequestState})
		}
	}
	ctx = withCallHeader(ctx, req.Extra)
	caller := p.Caller()
	var res *mcp.CallToolResult
	var session string
	if req.Session != nil && f.sessions.get(req.Session.ID()) != nil {
		session = req.Session.ID()
	}
	if done, refused := f.startCall(p, session); refused != nil {
		res = servers.Refused(refused)
	} else {
		defer done()
	}
	if res == nil && req.Extra != nil {
		var err error
		if caller, err = keyedCaller(caller, req.Extra.Header); err != nil {
			res = servers.Refused(keyRefusal(err))
		}
	}
	if res == nil {
		res = f.router.CallForPerson(ctx, CompanyRegistry(f.company), caller, req.Params.Name, args)
	}
	if modern {
		res = typedResult(res)
	}
	return res
}

const principalKey = "crewlet/principal"

func principalOf(extra *mcp.RequestExtra) (authority.Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return authority.Principal{}, false
	}
	p, ok := extra.TokenInfo.Extra[principalKey].(authority.Principal)
	return p, ok
}

type ctxKey struct{}

func principalFrom(ctx context.Context) (authority.Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(authority.Principal)
	return p, ok
}
