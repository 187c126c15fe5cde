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
// prompts are re-exported as they are, and completion and subscription
// requests are forwarded to the server that owns what they name, so a client
// of the hub sees what it would see talking to the server directly.

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
		return in.ReadResource(ctx, req.Params)
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
				return in.GetPrompt(ctx, req.Params)
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
	switch {
	case ref == nil:
	case ref.Type == "ref/prompt":
		f.mu.Lock()
		if s, ok := f.owned.prompts[ref.Name]; ok {
			in = f.owned.insts[s]()
		}
		f.mu.Unlock()
	case ref.Type == "ref/resource":
		f.mu.Lock()
		if s, ok := f.owned.templates[ref.URI]; ok {
			in = f.owned.insts[s]()
		}
		f.mu.Unlock()
		if in == nil {
			in = f.ownerOfURI(ref.URI)
		}
	}
	if in == nil {
		// Nothing to complete from: an empty answer, as a server with no
		// completions for a reference gives.
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	return in.Complete(ctx, req.Params)
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
	ss    *mcp.ServerSession
	token any
	call  context.Context
}

func (d sessionDownstream) Log(_ context.Context, p *mcp.LoggingMessageParams) error {
	return d.ss.Log(d.call, p)
}

func (d sessionDownstream) Progress(_ context.Context, p *mcp.ProgressNotificationParams) error {
	return d.ss.NotifyProgress(d.call, p)
}

func (d sessionDownstream) CreateMessage(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return d.ss.CreateMessage(d.call, p)
}

func (d sessionDownstream) Elicit(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return d.ss.Elicit(d.call, p)
}

func (d sessionDownstream) ListRoots(_ context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return d.ss.ListRoots(d.call, p)
}

func (d sessionDownstream) ProgressToken() any { return d.token }
