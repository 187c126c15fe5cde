//lint:file-ignore SA1019 a hub forwards logging and sampling (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package hub

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Beside tools, an upstream server's resources, resource templates and
// prompts are re-exported, and completion and subscription requests are
// forwarded to the server that owns what they name, so a client of the hub
// sees what it would see talking to the server directly, but for what the
// hub's sanitiser takes out (OUT-1): a server's listing, read, prompt,
// completion and update reach the client as surely as a tool's result, and
// pass the same rules (issue 25).

// owners says which upstream server owns each re-exported item.
type owners struct {
	resources map[string]string // uri -> server
	templates map[string]string // uri template -> server
	prompts   map[string]string // name -> server
	insts     map[string]func() *upstream.Instance
}

func newOwners() *owners {
	return &owners{resources: map[string]string{}, templates: map[string]string{}, prompts: map[string]string{},
		insts: map[string]func() *upstream.Instance{}}
}

// mirrorFeatures replaces what server offers on the operator server. An
// item another server already offers under the same key is left to that
// server and logged, never shadowed.
func (f *operator) mirrorFeatures(server string, feats upstream.Features, inst func() *upstream.Instance) {
	feats = f.cleanFeatures(server, feats)
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.owned
	drop := func(m map[string]string, remove func(...string)) {
		var keys []string
		for k, s := range m {
			if s == server {
				keys = append(keys, k)
				delete(m, k)
			}
		}
		if len(keys) > 0 {
			remove(keys...)
		}
	}
	drop(o.resources, f.server.RemoveResources)
	drop(o.templates, f.server.RemoveResourceTemplates)
	drop(o.prompts, f.server.RemovePrompts)
	if inst == nil {
		delete(o.insts, server)
		return
	}
	o.insts[server] = inst
	// claim files key under this server unless another server offers it.
	claim := func(m map[string]string, kind, key string) bool {
		if other, ok := m[key]; ok {
			f.log.Warn("mcp_server_feature_collision", "server", server, "kind", kind, "key", key, "owner", other)
			return false
		}
		m[key] = server
		return true
	}
	running := func() (*upstream.Instance, error) {
		if in := inst(); in != nil {
			return in, nil
		}
		return nil, fmt.Errorf("the MCP server %q is no longer running on this node", server)
	}
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		in, err := running()
		if err != nil {
			return nil, err
		}
		res, err := in.ReadResource(ctx, hopParams(req.Params))
		return passOn(f, server, "resources/read", res, err, f.router.clean.ReadResource)
	}
	for _, r := range feats.Resources {
		if claim(o.resources, "resource", r.URI) {
			f.server.AddResource(r, read)
		}
	}
	for _, t := range feats.Templates {
		if claim(o.templates, "resource template", t.URITemplate) {
			f.server.AddResourceTemplate(t, read)
		}
	}
	for _, p := range feats.Prompts {
		if claim(o.prompts, "prompt", p.Name) {
			f.server.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				in, err := running()
				if err != nil {
					return nil, err
				}
				res, err := in.GetPrompt(ctx, hopParams(req.Params))
				return passOn(f, server, "prompts/get", res, err, f.router.clean.GetPrompt)
			})
		}
	}
}

// ownerOfURI finds the instance that owns a resource URI: an exact resource,
// else the server whose template the URI fits.
func (f *operator) ownerOfURI(uri string) *upstream.Instance {
	f.mu.Lock()
	server := f.ownerLocked(uri)
	get := f.owned.insts[server]
	f.mu.Unlock()
	if get == nil {
		return nil
	}
	return get()
}

func (f *operator) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := req.Params.Ref
	var in *upstream.Instance
	var server string
	switch {
	case ref == nil:
	case ref.Type == "ref/prompt":
		f.mu.Lock()
		if s, ok := f.owned.prompts[ref.Name]; ok {
			in, server = f.owned.insts[s](), s
		}
		f.mu.Unlock()
	case ref.Type == "ref/resource":
		// A template by its own name, else whoever owns the URI.
		f.mu.Lock()
		s, ok := f.owned.templates[ref.URI]
		if !ok {
			s = f.ownerLocked(ref.URI)
		}
		get := f.owned.insts[s]
		f.mu.Unlock()
		if get != nil {
			in, server = get(), s
		}
	}
	if in == nil {
		// Nothing to complete from: an empty answer, as a server with no
		// completions for a reference gives.
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	res, err := in.Complete(ctx, hopParams(req.Params))
	return passOn(f, server, "completion/complete", res, err, f.router.clean.Complete)
}

// hopParams is a client's request params as the hub sends them on to the
// server: without the _meta keys the protocol reserves
// (io.modelcontextprotocol/...). They describe the client's hop, the
// revision of a 2026-07-28 request among them, and the hub's own session
// to the server speaks for its hop: a server on a session revision refuses
// a request that names 2026-07-28. p is never changed.
func hopParams[P any, PP interface {
	*P
	mcp.Params
}](p PP) PP {
	if p == nil {
		return p
	}
	meta := p.GetMeta()
	keep := make(map[string]any, len(meta))
	for k, v := range meta {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			keep[k] = v
		}
	}
	if len(keep) == len(meta) {
		return p
	}
	c := PP(new(P))
	*c = *p
	if len(keep) == 0 {
		keep = nil
	}
	c.SetMeta(keep)
	return c
}

// resourceUpdated passes on a server's word that a resource changed. A
// notification holding binary data is dropped and said in the log, as
// cleanDownstream drops a log line.
func (f *operator) resourceUpdated(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams) {
	clean, err := f.router.clean.ResourceUpdated(p)
	if err != nil {
		f.log.Warn("server_message_refused", "method", "notifications/resources/updated", "reason", err.Error())
		return
	}
	_ = f.server.ResourceUpdated(ctx, clean)
}

// passOn is the one rule for what a client is handed of a server's answer
// about one of its resources or prompts: the answer as clean (a method of
// the hub's sanitiser) leaves it, or the server's failure as
// sanitize.Error leaves it. An answer holding binary data is refused whole,
// as a tool's result is, never repaired or passed on in part (OUT-1); it is
// the server's failure, said in the log and to the client.
func passOn[R any](f *operator, server, method string, res *R, err error, clean func(*R) (*R, error)) (*R, error) {
	if err != nil {
		return nil, f.router.clean.Error(err)
	}
	out, err := clean(res)
	if err != nil {
		f.log.Warn("server_answer_refused", "server", server, "method", method, "reason", err.Error())
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return out, nil
}

// cleanFeatures is what the hub offers of what server lists, each item
// sanitised (OUT-1). A client addresses an item by its URI, URI template or
// name, and a prompt's arguments by theirs, and the hub forwards that
// address to the server as the client wrote it. An item whose address the
// sanitiser would change (it holds a secret, a control character) cannot
// be offered: as written it leaks, as redacted it names nothing the server
// knows. Such an item, and one holding binary data, is left out and said in
// the log, by the address a client would have read.
func (f *operator) cleanFeatures(server string, feats upstream.Features) upstream.Features {
	s := f.router.clean
	return upstream.Features{
		Resources: keepClean(f, server, "resource", feats.Resources, s.Resource,
			func(r *mcp.Resource) string { return r.URI }),
		Templates: keepClean(f, server, "resource template", feats.Templates, s.ResourceTemplate,
			func(t *mcp.ResourceTemplate) string { return t.URITemplate }),
		Prompts: keepClean(f, server, "prompt", feats.Prompts, s.Prompt, promptAddress),
	}
}

// promptAddress is every name a client addresses a prompt by: its own and
// its arguments'. NUL joins them: no sanitised text holds one.
func promptAddress(p *mcp.Prompt) string {
	names := []string{p.Name}
	for _, a := range p.Arguments {
		if a != nil {
			names = append(names, a.Name)
		}
	}
	return strings.Join(names, "\x00")
}

// keepClean sanitises each item of one kind with clean and keeps those
// whose address (addr) came through unchanged.
func keepClean[T any](f *operator, server, kind string, items []*T, clean func(*T) (*T, error), addr func(*T) string) []*T {
	var out []*T
	for _, item := range items {
		if item == nil {
			continue
		}
		c, err := clean(item)
		switch {
		case err != nil:
			f.log.Warn("mcp_server_feature_refused", "server", server, "kind", kind, "reason", err.Error())
		case addr(c) != addr(item):
			f.log.Warn("mcp_server_feature_refused", "server", server, "kind", kind, "key", addr(c),
				"reason", "its address holds what the hub redacts or strips")
		default:
			out = append(out, c)
		}
	}
	return out
}

// subscribe forwards a client's subscription. Clients of the hub share one
// subscription upstream per resource: the first subscriber opens it and the
// last to leave closes it, so one client's unsubscribe never silences
// another.
func (f *operator) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	in := f.ownerOfURI(uri)
	if in == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no MCP server of this hub offers %q", uri)}
	}
	f.mu.Lock()
	f.subs[uri]++
	first := f.subs[uri] == 1
	f.mu.Unlock()
	if !first {
		return nil
	}
	if err := in.Subscribe(ctx, req.Params); err != nil {
		f.mu.Lock()
		f.subs[uri]--
		f.mu.Unlock()
		return err
	}
	return nil
}

func (f *operator) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	f.mu.Lock()
	if f.subs[uri] == 0 {
		f.mu.Unlock()
		return nil
	}
	f.subs[uri]--
	last := f.subs[uri] == 0
	if last {
		delete(f.subs, uri)
	}
	f.mu.Unlock()
	if !last {
		return nil
	}
	if in := f.ownerOfURI(uri); in != nil {
		return in.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	}
	return nil
}

// resubscribe opens again, on a server that came back, the subscriptions
// clients hold to its resources: a new session starts with none.
func (f *operator) resubscribe(server string, in *upstream.Instance) {
	f.mu.Lock()
	var uris []string
	for uri, n := range f.subs {
		if n > 0 && f.ownerLocked(uri) == server {
			uris = append(uris, uri)
		}
	}
	f.mu.Unlock()
	tasks := make([]func(), len(uris))
	for n, uri := range uris {
		tasks[n] = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := in.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				f.log.Warn("resubscribe_failed", "server", server, "uri", uri, "error", err.Error())
			}
		}
	}
	fanOut(f.log, "restore subscriptions", tasks...)
}

// ownerLocked names the server owning a URI; f.mu is held.
func (f *operator) ownerLocked(uri string) string {
	if s, ok := f.owned.resources[uri]; ok {
		return s
	}
	for tmpl, s := range f.owned.templates {
		if prefix, _, ok := strings.Cut(tmpl, "{"); ok && strings.HasPrefix(uri, prefix) {
			return s
		}
	}
	return ""
}

// sessionDownstream hands what an upstream server sends during a call to the
// operator session that made it. Everything goes out under the context of
// the client's own call, not the upstream's: that context names the request
// the messages relate to, so the transport sends them on that request's
// stream, where the client is listening.
type sessionDownstream struct {
	ss     *mcp.ServerSession
	token  any
	caller string // the credential the call was made with
	call   context.Context
	// modern is a client on 2026-07-28, which is asked nothing while a
	// call is served (refuseRequest).
	modern bool
}

func (d sessionDownstream) Log(_ context.Context, p *mcp.LoggingMessageParams) error {
	return d.ss.Log(d.call, p)
}

func (d sessionDownstream) Progress(_ context.Context, p *mcp.ProgressNotificationParams) error {
	return d.ss.NotifyProgress(d.call, p)
}

func (d sessionDownstream) CreateMessage(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if d.modern {
		return nil, refuseRequest("sampling/createMessage")
	}
	return d.ss.CreateMessage(d.call, p)
}

func (d sessionDownstream) Elicit(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if d.modern {
		return nil, refuseRequest("elicitation/create")
	}
	return d.ss.Elicit(d.call, p)
}

func (d sessionDownstream) ListRoots(_ context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if d.modern {
		return nil, refuseRequest("roots/list")
	}
	return d.ss.ListRoots(d.call, p)
}

func (d sessionDownstream) ProgressToken() any { return d.token }

func (d sessionDownstream) Caller() string { return d.caller }
