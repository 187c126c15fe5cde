package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreams keeps the company's third-party servers: one supervised instance
// per shared server, and one per seat that declares credentials for a
// per-role template (CFG-6), reconciled on every apply.
type upstreams struct {
	h  *Hub
	mu sync.Mutex
	// byName holds instances by key: the server's name, or name@seat for a
	// seat's child. A server held back for a credential has an entry with no
	// instance.
	byName map[string]*upstreamServer
	// seats holds each seat's own catalogue: its children's tools (CAT-11).
	seats map[string]*Catalogue
	// closed is set by closeAll: an apply racing the hub's close starts
	// nothing that nobody would stop.
	closed bool
}

// instanceKey names one instance of a server.
func instanceKey(server, seat string) string {
	if seat == "" {
		return server
	}
	return server + "@" + seat
}

type upstreamServer struct {
	decl config.MCPServer
	// seat is the seat whose child this is; empty for a shared server.
	seat     string
	resolved upstream.Resolved
	inst     *upstream.Instance
	hold     *upstream.Hold
	// fileErr is why its tools could not be filed (a name collision).
	fileErr  string
	unlisted []string
}

// declaredOf turns a company entry into what resolution reads.
func declaredOf(s config.MCPServer) upstream.Declared {
	return upstream.Declared{
		Name: s.Name, Transport: s.EffectiveTransport(), Command: s.Command, Args: s.Args,
		URL: s.URL, Shared: s.IsShared(), Env: s.Env, Headers: s.Headers,
		OptionalKeys: s.OptionalKeys, ToolPrefix: s.ToolPrefix,
	}
}

// reconcile makes the running set match a revision (CFG-7): a server whose
// resolved spec did not change is left alone (and retried at once if it is
// down, MCP-9); an added, re-pointed or re-credentialed one starts or
// restarts; a removed one stops; one whose credential stopped resolving is
// retired (CFG-8). A server that will not start costs only its own tools.
func (u *upstreams) reconcile(c *config.Company) {
	log := u.h.log
	type plan struct {
		decl     config.MCPServer
		seat     string
		resolved upstream.Resolved
	}
	var starts []plan
	var stops, refiles []*upstreamServer
	u.mu.Lock()
	want := map[string]bool{}
	for _, w := range wantedInstances(c) {
		key := instanceKey(w.decl.Name, w.seat)
		want[key] = true
		resolved, hold := upstream.Resolve(declaredOf(w.decl), w.block, upstream.Lookup(u.h.opts.Env), nil)
		if w.seat != "" {
			// A seat's child is named after its seat in logs and status,
			// never in the catalogue (CAT-1).
			resolved.Name = key
		}
		cur := u.byName[key]
		if hold != nil {
			if cur != nil && cur.inst != nil {
				log.Warn("mcp_server_retired", "server", w.decl.Name, "seat", w.seat, "variable", hold.Variable, "reason", hold.Sentence)
				stops = append(stops, cur)
			}
			log.Error("mcp_server_credential_missing", "server", w.decl.Name, "seat", w.seat, "variable", hold.Variable, "reason", hold.Sentence)
			u.byName[key] = &upstreamServer{decl: w.decl, seat: w.seat, hold: hold}
			continue
		}
		if cur != nil && cur.inst != nil && cur.resolved.Digest == resolved.Digest && sameDecl(cur.decl, w.decl) {
			if !reflect.DeepEqual(cur.decl.ToolAnnotations, w.decl.ToolAnnotations) {
				// Overrides change the catalogue, not the server: refile
				// its tools with the new hints, no restart.
				refiles = append(refiles, cur)
			}
			cur.decl = w.decl
			if cur.inst.Status().State == upstream.StateDown {
				cur.inst.Retry()
			}
			continue
		}
		if cur != nil && cur.inst != nil {
			stops = append(stops, cur)
		}
		delete(u.byName, key)
		starts = append(starts, plan{w.decl, w.seat, resolved})
	}
	for key, cur := range u.byName {
		if !want[key] {
			stops = append(stops, cur)
			delete(u.byName, key)
		}
	}
	u.mu.Unlock()

	// Stop before start, and outside the lock: Close waits for the
	// instance's goroutine, which may be filing its tools.
	for _, s := range stops {
		if s.inst != nil {
			_ = s.inst.Close()
		}
		if s.seat != "" {
			u.seatCatalogue(s.seat).RemoveSource(SourceMCP(s.decl.Name))
			continue
		}
		u.h.company.RemoveSource(SourceMCP(s.decl.Name))
		u.h.front.mirrorFeatures(s.decl.Name, upstream.Features{}, nil)
	}
	if len(stops) > 0 {
		u.h.front.syncTools()
	}
	for _, s := range refiles {
		u.refile(s, s.inst.Tools())
	}

	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	for _, p := range starts {
		u.byName[instanceKey(p.decl.Name, p.seat)] = u.start(p.decl, p.seat, p.resolved)
	}
}

// wanted is one instance a revision asks for.
type wanted struct {
	decl  config.MCPServer
	seat  string
	block *upstream.SeatBlock
}

// wantedInstances lists the instances a revision declares: every shared
// server, and for each per-role template one child per agent seat that
// declares credentials for it, its own block over its unit's (CFG-5). A
// seat with no block gets no child; people never do.
func wantedInstances(c *config.Company) []wanted {
	var out []wanted
	for _, d := range c.MCPServers {
		if d.IsShared() {
			out = append(out, wanted{decl: d})
			continue
		}
		for _, u := range c.Units {
			for _, r := range u.Roles {
				if r.Kind == "human" {
					continue
				}
				unit, seat := u.MCPEnv[d.Name], r.MCPEnv[d.Name]
				if unit == nil && seat == nil {
					continue
				}
				out = append(out, wanted{decl: d, seat: r.Handle, block: &upstream.SeatBlock{Unit: unit, Seat: seat}})
			}
		}
		for _, r := range c.Roles {
			if seat := r.MCPEnv[d.Name]; r.Kind != "human" && seat != nil {
				out = append(out, wanted{decl: d, seat: r.Handle, block: &upstream.SeatBlock{Seat: seat}})
			}
		}
	}
	return out
}

// seatCatalogue returns a seat's own catalogue, creating it.
func (u *upstreams) seatCatalogue(seat string) *Catalogue {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seatCatalogueLocked(seat)
}

func (u *upstreams) seatCatalogueLocked(seat string) *Catalogue {
	c, ok := u.seats[seat]
	if !ok {
		c = NewCatalogue()
		u.seats[seat] = c
	}
	return c
}

// seatCatalogues lists every seat's catalogue, for telling a tool another
// seat holds from one nothing registered (REF-5).
func (u *upstreams) seatCatalogues() []*Catalogue {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]*Catalogue, 0, len(u.seats))
	for _, c := range u.seats {
		out = append(out, c)
	}
	return out
}

// SeatRegistry is what a seat is offered: its own children's tools, then the
// company's (CAT-10, CAT-11).
func (h *Hub) SeatRegistry(seat string) Registry {
	return SeatRegistry(h.ups.seatCatalogue(seat), h.company)
}

// sameDecl compares what the running instance was built from beyond its
// resolved spec. A new prefix or start timeout restarts it; new
// tool_annotations only refile its tools (see reconcile).
func sameDecl(a, b config.MCPServer) bool {
	return a.ToolPrefix == b.ToolPrefix && a.StartupTimeoutSeconds == b.StartupTimeoutSeconds
}

// start launches a server; the caller holds u.mu and files the result.
func (u *upstreams) start(decl config.MCPServer, seat string, resolved upstream.Resolved) *upstreamServer {
	s := &upstreamServer{decl: decl, seat: seat, resolved: resolved}
	dir, _ := os.Getwd()
	timeout := time.Duration(decl.StartupTimeoutSeconds) * time.Second
	if len(resolved.EmptyKeys) > 0 {
		u.h.log.Warn("empty_env_vars", "server", decl.Name, "seat", seat, "keys", resolved.EmptyKeys)
	}
	var lease func() bool
	if seat != "" {
		lease = func() bool { return u.h.opts.Leases.Holds(seat) }
	}
	s.inst = upstream.Start(upstream.Options{
		Version:      Version,
		Seat:         seat,
		Lease:        lease,
		Spec:         resolved,
		Dir:          dir,
		StartTimeout: timeout,
		Logger:       u.h.log.With("component", "upstream"),
		OnTools:      func(tools []upstream.Tool) { u.refile(s, tools) },
		OnFeatures:   func(feats upstream.Features) { u.refileFeatures(s, feats) },
		OnConnected: func() {
			if seat != "" {
				return
			}
			u.mu.Lock()
			current := u.byName[decl.Name] == s
			in := s.inst
			u.mu.Unlock()
			if current && in != nil {
				u.h.front.resubscribe(decl.Name, in)
			}
		},
		OnResourceUpdated: func(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams) {
			_ = u.h.front.server.ResourceUpdated(ctx, p)
		},
	})
	return s
}

// refile files a server's listed tools in the company catalogue: its source,
// prefix, hints read from the raw annotations with the operator's overrides
// on top (CAT-9), and refuses the whole list if a name collides (CAT-12).
func (u *upstreams) refile(s *upstreamServer, tools []upstream.Tool) {
	key := instanceKey(s.decl.Name, s.seat)
	u.mu.Lock()
	current := u.byName[key] == s
	decl := s.decl
	u.mu.Unlock()
	if !current {
		// A revision replaced this instance while it was starting.
		return
	}
	name := decl.Name
	overrides, _ := annotationOverrides(decl.ToolAnnotations)
	listed := map[string]bool{}
	src := SourceMCP(name)
	backend := &upstreamBackend{server: name, inst: func() *upstream.Instance {
		u.mu.Lock()
		defer u.mu.Unlock()
		if s := u.byName[key]; s != nil {
			return s.inst
		}
		return nil
	}}
	entries := make([]Entry, 0, len(tools))
	for _, t := range tools {
		listed[t.Def.Name] = true
		e, err := entryFromTool(t.Def, src, decl.ToolPrefix, backend)
		if err != nil {
			u.h.log.Error("mcp_server_failed", "server", name, "reason", err.Error())
			return
		}
		// The raw annotations, not the SDK's decoded booleans: an absent
		// hint is unknown (CAT-7).
		e.Hints = servers.HintsFromAnnotations(t.Annotations).Override(overrides[t.Def.Name])
		// Where an MCP tool delivers is a declaration about its server;
		// until the company declares one, it is unknown, which the fence
		// reads as a possible delivery.
		e.Delivers = ""
		entries = append(entries, e)
	}
	var unlisted []string
	for tool := range overrides {
		if !listed[tool] {
			unlisted = append(unlisted, tool)
		}
	}
	sort.Strings(unlisted)
	u.h.log.Info("tools_discovered", "server", name, "seat", s.seat, "tools", len(entries), "unlisted_annotations", unlisted)
	cat := u.h.company
	if s.seat != "" {
		cat = u.seatCatalogue(s.seat)
	}
	err := cat.Replace(src, entries)
	u.mu.Lock()
	s.unlisted = unlisted
	s.fileErr = ""
	if err != nil {
		s.fileErr = err.Error()
	}
	u.mu.Unlock()
	if err != nil {
		u.h.log.Error("mcp_server_failed", "server", name, "reason", err.Error())
		return
	}
	u.h.front.syncTools()
}

// refileFeatures re-exports a server's resources, templates and prompts.
func (u *upstreams) refileFeatures(s *upstreamServer, feats upstream.Features) {
	u.mu.Lock()
	current := u.byName[s.decl.Name] == s
	u.mu.Unlock()
	if !current || s.seat != "" {
		// A seat's child serves that seat's turns only; the operator
		// surface re-exports shared servers.
		return
	}
	u.h.front.mirrorFeatures(s.decl.Name, feats, func() *upstream.Instance {
		u.mu.Lock()
		defer u.mu.Unlock()
		if cur := u.byName[s.decl.Name]; cur != nil {
			return cur.inst
		}
		return nil
	})
}

// annotationOverrides reads tool_annotations in either spelling.
func annotationOverrides(m map[string]map[string]bool) (map[string]servers.Hints, error) {
	out := map[string]servers.Hints{}
	for tool, keys := range m {
		var h servers.Hints
		for k, v := range keys {
			switch k {
			case "read_only", "readOnlyHint":
				h.ReadOnly = servers.Of(v)
			case "destructive", "destructiveHint":
				h.Destructive = servers.Of(v)
			case "idempotent", "idempotentHint":
				h.Idempotent = servers.Of(v)
			case "open_world", "openWorldHint":
				h.OpenWorld = servers.Of(v)
			default:
				return nil, fmt.Errorf("tool_annotations.%s: %q is not a hint", tool, k)
			}
		}
		out[tool] = h
	}
	return out, nil
}

// closeAll stops every instance.
func (u *upstreams) closeAll() {
	// Mark closed and take the instances under the lock, then close them
	// outside it: Close waits for each instance's goroutine, which may be
	// filing its tools and need the lock.
	u.mu.Lock()
	u.closed = true
	var insts []*upstream.Instance
	for _, s := range u.byName {
		if s.inst != nil {
			insts = append(insts, s.inst)
		}
	}
	u.mu.Unlock()
	for _, in := range insts {
		_ = in.Close()
	}
}

// awaitStarted waits until no instance is still in its first start, or ctx
// ends. Later arrivals file their tools when they come up.
func (u *upstreams) awaitStarted(ctx context.Context) {
	for {
		starting := false
		u.mu.Lock()
		for _, s := range u.byName {
			if s.inst != nil && s.inst.Status().State == upstream.StateStarting {
				starting = true
			}
		}
		u.mu.Unlock()
		if !starting {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// upstreamBackend routes calls to a server's current instance.
type upstreamBackend struct {
	server string
	inst   func() *upstream.Instance
}

func (b *upstreamBackend) Call(ctx context.Context, _ authority.Caller, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	inst := b.inst()
	if inst == nil {
		return nil, &upstream.DownError{Server: b.server, Cause: "it is no longer running on this node"}
	}
	return inst.Call(ctx, tool, args)
}

// downRefusal says, in the engine's words, that a server is down (MCP-6):
// which server, what took it down, when the next restart is, and, for a call
// that was in flight on a tool not known to be read-only, that it may have
// taken effect.
func downRefusal(e *upstream.DownError, hints servers.Hints) *authority.Refusal {
	var b strings.Builder
	fmt.Fprintf(&b, "The MCP server %q is not running: %s.", e.Server, e.Cause)
	switch {
	case e.NextRestart.IsZero():
		b.WriteString(" No restart is scheduled.")
	case time.Until(e.NextRestart) <= time.Second:
		b.WriteString(" It is being restarted now; try again in a moment.")
	default:
		fmt.Fprintf(&b, " Its next restart is in %s.", time.Until(e.NextRestart).Round(time.Second))
	}
	mayHave := e.InFlight && hints.ReadOnly != servers.Yes
	if mayHave {
		b.WriteString(" The call had been sent and no answer came back, so it may have taken effect: check before repeating it.")
	}
	r := authority.Refuse(authority.Unavailable, "%s", b.String()).WithData("server", e.Server)
	if mayHave {
		r = r.WithData("may_have_taken_effect", true)
	}
	return r
}

func asDown(err error) (*upstream.DownError, bool) {
	var d *upstream.DownError
	ok := errors.As(err, &d)
	return d, ok
}

// referencedValues lists what every ${VAR} a revision's servers are started
// with resolves to, so a server that echoes its own credential back in a
// tool result does not hand it to the caller.
func referencedValues(c *config.Company, lookup config.Lookup) []string {
	var out []string
	add := func(v string) {
		for _, name := range upstream.References(v) {
			if val, ok := lookup(name); ok && val != "" {
				out = append(out, val)
			}
		}
	}
	for _, w := range wantedInstances(c) {
		add(w.decl.URL)
		for _, m := range []map[string]string{w.decl.Env, w.decl.Headers} {
			for _, v := range m {
				add(v)
			}
		}
		if w.block != nil {
			for _, m := range []map[string]string{w.block.Unit, w.block.Seat} {
				for _, v := range m {
					add(v)
				}
			}
		}
	}
	return out
}
