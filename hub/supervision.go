package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/grants"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// events is how third-party supervision reports upward. The operator
// surface implements it: supervision never reaches into the surface, and
// the surface never into supervision's state.
type events interface {
	// toolsChanged says the company catalogue moved (MCP-8).
	toolsChanged()
	// featuresChanged replaces what a shared server re-exports beside its
	// tools; inst returns its current instance, and a nil inst withdraws
	// them.
	featuresChanged(server string, feats upstream.Features, inst func() *upstream.Instance)
	// serverUp says a shared server came up, first start or restart, on a
	// new session that holds no subscription yet.
	serverUp(server string, inst *upstream.Instance)
	// resourceUpdated passes on a server's word that a resource changed.
	resourceUpdated(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams)
	// serverChanged says a server's row, or a seat's catalogue, may read
	// differently now. It must not block.
	serverChanged()
}

// supervisionDeps is everything supervision is given; it holds nothing of
// the hub's beyond these.
type supervisionDeps struct {
	company *Catalogue
	env     config.Lookup
	// dataDir names the secret store in the command a server held for a
	// missing value suggests (Options.DataDir).
	dataDir string
	leases  Leases
	log     *slog.Logger
	events  events
	status  *statusTable
	ledger  *upstream.Ledger
	// acting reports whether this node acts for a seat now: only then
	// does it run the seat's children (FLT-1).
	acting func(seat string) bool
	// heartbeat is how long a restart held back for a lease waits before
	// asking again (MCP-10); the instance's default if zero.
	heartbeat time.Duration
	observe   ServerObserver
	hops      upstream.HopObserver
	// clean sanitises what a server lists of its tools before it is filed
	// (OUT-1): a description reaches every model offered the tool.
	clean *sanitize.Sanitizer
	// pins holds the tools of pinned servers no person approved as
	// listed (issue 28).
	pins *pinning
	// grants mints seats' grants for auth: oauth servers; nil where the
	// node keeps no grant store.
	grants *grants.Minter
}

// supervision keeps the company's third-party servers: one supervised
// instance per shared server, and one per seat that declares credentials
// for a per-role template (CFG-6), reconciled on every apply.
//
// Locking: mu guards the instance and seat maps; fileMu makes each filing
// (a check of names across catalogues, then the change) one step. Neither
// is held while an instance is closed, since Close waits for the
// instance's goroutine, which may be filing.
type supervision struct {
	supervisionDeps

	mu sync.Mutex
	// byName holds instances by key: the server's name, or name@seat for a
	// seat's child. A server held back for a credential has an entry with
	// no instance.
	byName map[string]*upstreamServer
	// seats holds each seat's own catalogue: its children's tools (CAT-11).
	seats map[string]*Catalogue
	// closed is set by closeAll: an apply racing the hub's close starts
	// nothing that nobody would stop.
	closed bool
	// refusing counts the stops of instances refused for a name
	// collision (refuse), which closeAll waits for.
	refusing sync.WaitGroup
	// replacing counts, by seat, the children a reconcile has taken out
	// of byName to stop and start again: between the two the seat has no
	// instance, and it is still starting, not started (FLT-4: an apply
	// landing while a seat is claimed is folded into the claim).
	replacing map[string]int

	fileMu sync.Mutex
}

func newSupervision(d supervisionDeps) *supervision {
	return &supervision{supervisionDeps: d, byName: map[string]*upstreamServer{}, seats: map[string]*Catalogue{}, replacing: map[string]int{}}
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
	// refused says its tools were refused for a name collision and it
	// was stopped (refuse); guarded by supervision's mu.
	refused bool
}

func (s *upstreamServer) key() string { return instanceKey(s.decl.Name, s.seat) }

// reconcile makes the running set match a revision (CFG-7): a server whose
// resolved spec did not change is left alone (and retried at once if it is
// down, MCP-9); an added, re-pointed or re-credentialed one starts or
// restarts; a removed one stops; one whose credential stopped resolving is
// retired (CFG-8). A server that will not start costs only its own tools.
// A seat's children run only while this node acts for the seat (FLT-1).
func (u *supervision) reconcile(c *config.Company) { u.reconcileScope(c, nil) }

// reconcileSeat reconciles one seat's children only, when this node
// claims the seat, lets it go, or stops or starts proving its lease; the
// shared servers and every other seat's children are left as they are.
func (u *supervision) reconcileSeat(c *config.Company, seat string) {
	u.reconcileScope(c, func(s string) bool { return s == seat })
}

// reconcileScope reconciles the instances whose seat in scope accepts (all
// if scope is nil; a shared server's seat is "").
func (u *supervision) reconcileScope(c *config.Company, scope func(seat string) bool) {
	type plan struct {
		decl     config.MCPServer
		seat     string
		resolved upstream.Resolved
	}
	var starts []plan
	var stops, refiles []*upstreamServer
	u.mu.Lock()
	want, declared := map[string]bool{}, map[string]bool{}
	for _, w := range c.Instances() {
		if scope != nil && !scope(w.Seat) {
			continue
		}
		declared[instanceKey(w.Server.Name, w.Seat)] = true
		if w.Seat != "" && !u.acting(w.Seat) {
			// Not this node's seat now: no child, no status of its own.
			continue
		}
		key := instanceKey(w.Server.Name, w.Seat)
		want[key] = true
		resolved, hold := upstream.Resolve(w.Server.Declared(), w.Block, upstream.Lookup(u.env), u.dataDir)
		if hold == nil && w.Server.UsesOAuth() && w.Seat != "" {
			hold = u.grantHold(w)
		}
		if w.Seat != "" {
			// A seat's child is named after its seat in logs and status,
			// never in the catalogue (CAT-1).
			resolved.Name = key
		}
		cur := u.byName[key]
		if hold != nil {
			if cur != nil && cur.inst != nil {
				u.log.Warn("mcp_server_retired", "server", w.Server.Name, "seat", w.Seat, "variable", hold.Variable, "reason", hold.Sentence)
				stops = append(stops, cur)
			}
			u.byName[key] = &upstreamServer{decl: w.Server, seat: w.Seat}
			u.status.held(key, w.Server.Name, w.Seat, hold)
			// Said once the row reads it, so whoever acts on the line
			// finds the server held.
			u.logHold(w, hold)
			continue
		}
		// A server stopped for a collision is started again, as a down
		// one is retried (MCP-9): the revision may have freed its names.
		if cur != nil && cur.inst != nil && !cur.refused && cur.resolved.Digest == resolved.Digest && sameDecl(cur.decl, w.Server) {
			if !sameFiling(cur.decl, w.Server) {
				// Overrides and a delivery surface change the catalogue,
				// not the server: refile its tools, no restart.
				refiles = append(refiles, cur)
			}
			cur.decl = w.Server
			if cur.inst.Status().State == upstream.StateDown {
				cur.inst.Retry()
			}
			continue
		}
		if cur != nil && cur.inst != nil {
			stops = append(stops, cur)
		}
		delete(u.byName, key)
		starts = append(starts, plan{w.Server, w.Seat, resolved})
		if w.Seat != "" {
			u.replacing[w.Seat]++
		}
	}
	for key, cur := range u.byName {
		if scope != nil && !scope(cur.seat) {
			continue
		}
		if !want[key] {
			if !declared[key] {
				u.revokeGrant(cur.decl, cur.seat)
			}
			stops = append(stops, cur)
			delete(u.byName, key)
			u.status.drop(key)
		}
	}
	u.mu.Unlock()

	// Stop before start, and outside the lock: Close waits for the
	// instance's goroutine, which may be filing its tools. Stops run side
	// by side, each bounded by its own grace.
	var tasks []func()
	for _, s := range stops {
		if s.inst != nil {
			tasks = append(tasks, func() { _ = s.inst.Close() })
		}
	}
	fanOut(u.log, "stop servers", tasks...)
	companyMoved := false
	for _, s := range stops {
		if s.seat != "" {
			u.seatCatalogue(s.seat).RemoveSource(SourceMCP(s.decl.Name))
			continue
		}
		u.company.RemoveSource(SourceMCP(s.decl.Name))
		u.events.featuresChanged(s.decl.Name, upstream.Features{}, nil)
		companyMoved = true
	}
	if companyMoved {
		u.events.toolsChanged()
	}
	tasks = tasks[:0]
	for _, s := range refiles {
		tasks = append(tasks, func() { u.file(s, s.inst.Tools()) })
	}
	fanOut(u.log, "refile catalogues", tasks...)

	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range starts {
		if p.seat != "" {
			if u.replacing[p.seat]--; u.replacing[p.seat] <= 0 {
				delete(u.replacing, p.seat)
			}
		}
	}
	if u.closed {
		return
	}
	for _, p := range starts {
		s := u.start(p.decl, p.seat, p.resolved)
		u.byName[s.key()] = s
		u.status.running(s.key(), p.decl.Name, p.seat, s.inst)
	}
}

// sameDecl compares what the running instance was built from beyond its
// resolved spec. A new prefix or start timeout restarts it; what only
// changes how its tools are filed does not (see sameFiling).
func sameDecl(a, b config.MCPServer) bool {
	return a.ToolPrefix == b.ToolPrefix && a.StartupTimeoutSeconds == b.StartupTimeoutSeconds
}

// sameFiling compares what decides how a server's tools are filed:
// tool_annotations, the delivery surface and its trust.
func sameFiling(a, b config.MCPServer) bool {
	return reflect.DeepEqual(a.ToolAnnotations, b.ToolAnnotations) && reflect.DeepEqual(a.Delivers, b.Delivers) && a.Trust == b.Trust
}

// start launches a server; the caller holds u.mu and keeps the result.
func (u *supervision) start(decl config.MCPServer, seat string, resolved upstream.Resolved) *upstreamServer {
	s := &upstreamServer{decl: decl, seat: seat, resolved: resolved}
	dir, _ := os.Getwd()
	if len(resolved.EmptyKeys) > 0 {
		u.log.Warn("empty_env_vars", "server", decl.Name, "seat", seat, "keys", resolved.EmptyKeys)
	}
	var lease func() bool
	if seat != "" {
		lease = func() bool { return u.leases.Holds(seat) }
	}
	s.inst = upstream.Start(upstream.Options{
		Version:      Version,
		Seat:         seat,
		Lease:        lease,
		Heartbeat:    u.heartbeat,
		Spec:         resolved,
		HTTPClient:   u.grantClient(decl, seat),
		Dir:          dir,
		StartTimeout: time.Duration(decl.StartupTimeoutSeconds) * time.Second,
		Logger:       u.log.With("component", "upstream"),
		OnTools:      func(tools []upstream.Tool) { u.file(s, tools) },
		OnFeatures:   func(feats upstream.Features) { u.fileFeatures(s, feats) },
		OnConnected: func() {
			if in := u.current(s); in != nil && seat == "" {
				u.events.serverUp(decl.Name, in)
			}
		},
		OnResourceUpdated: u.events.resourceUpdated,
		Ledger:            u.ledger,
		Hops:              u.hops,
		OnStatus: func(prev, now upstream.Status) {
			u.observe.ServerStatus(decl.Name, seat, prev, now)
			u.events.serverChanged()
		},
	})
	return s
}

// current is s's instance while s is the instance of its key in force; nil
// once a revision replaced it or while it is being built.
func (u *supervision) current(s *upstreamServer) *upstream.Instance {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byName[s.key()] != s {
		return nil
	}
	return s.inst
}

// instanceOf is the instance in force under a key, for calls routed to it.
func (u *supervision) instanceOf(key string) *upstream.Instance {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.byName[key]; s != nil {
		return s.inst
	}
	return nil
}

// fileFeatures re-exports a shared server's resources, templates and
// prompts; a seat's child serves that seat's turns only.
func (u *supervision) fileFeatures(s *upstreamServer, feats upstream.Features) {
	if s.seat != "" || u.current(s) == nil {
		return
	}
	key := s.key()
	u.events.featuresChanged(s.decl.Name, feats, func() *upstream.Instance { return u.instanceOf(key) })
}

// seatCatalogue returns a seat's own catalogue, creating it.
func (u *supervision) seatCatalogue(seat string) *Catalogue {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.seats[seat]
	if !ok {
		c = NewCatalogue()
		u.seats[seat] = c
	}
	return c
}

// seatCatalogues lists every seat's catalogue by seat, for telling a tool
// another seat holds from one nothing registered (REF-5) and for the
// names a filing must not take.
func (u *supervision) seatCatalogues() map[string]*Catalogue {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]*Catalogue, len(u.seats))
	for seat, c := range u.seats {
		out[seat] = c
	}
	return out
}

// listings is each running or once-started instance's last tool list, by
// instance key: what an apply checks a revision's names against.
func (u *supervision) listings() map[string][]upstream.Tool {
	u.mu.Lock()
	insts := map[string]*upstream.Instance{}
	for key, s := range u.byName {
		if s.inst != nil {
			insts[key] = s.inst
		}
	}
	u.mu.Unlock()
	out := make(map[string][]upstream.Tool, len(insts))
	for key, in := range insts {
		out[key] = in.Tools()
	}
	return out
}

// closeAll stops every instance, side by side, and waits for the stops
// refuse began.
func (u *supervision) closeAll() {
	u.mu.Lock()
	u.closed = true
	var tasks []func()
	for _, s := range u.byName {
		if s.inst != nil {
			tasks = append(tasks, func() { _ = s.inst.Close() })
		}
	}
	u.mu.Unlock()
	fanOut(u.log, "stop servers", tasks...)
	u.refusing.Wait()
}

// refuse stops an instance whose tools were refused for a name collision
// (CAT-12): none of its tools can be offered, so its process would only
// run on unused until the hub stopped. It is called from the instance's
// own goroutine, while it files its tools, which Close waits for: so the
// stop runs beside it, and closeAll waits for it. The next apply starts
// the server again (reconcile), in case it freed the names.
func (u *supervision) refuse(s *upstreamServer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.byName[s.key()] != s {
		// Whoever closed the hub, or replaced the instance, stops it.
		return
	}
	s.refused = true
	u.refusing.Add(1)
	go func() {
		defer u.refusing.Done()
		_ = s.inst.Close()
	}()
}

// awaitStarted waits until no instance is still in its first start, or ctx
// ends. Later arrivals file their tools when they come up.
func (u *supervision) awaitStarted(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
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
		case <-t.C:
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

// CallRaw is Call answering the server's JSON, for the one pass. The
// decoded result it returns is always nil: the instance answers every call
// as the JSON its server wrote.
func (b *upstreamBackend) CallRaw(ctx context.Context, _ authority.Caller, tool string, args json.RawMessage) (json.RawMessage, *mcp.CallToolResult, error) {
	inst := b.inst()
	if inst == nil {
		return nil, nil, &upstream.DownError{Server: b.server, Cause: "it is no longer running on this node"}
	}
	return inst.CallRaw(ctx, tool, args)
}
