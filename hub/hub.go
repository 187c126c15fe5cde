package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/grants"
	"github.com/crewlet/hub/hub/oauth"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hub is one node's tool plane: the company catalogue, the first-party
// servers it mounts, third-party supervision, the router and the operator
// surface. It wires them; each is given what it needs and reports upward
// through its own small interface.
type Hub struct {
	opts     Options
	log      *slog.Logger
	company  *Catalogue
	router   *Router
	tokens   *authority.Tokens
	oauth    *oauth.Verifier
	clean    *sanitize.Sanitizer
	dir      atomic.Pointer[authority.Directory]
	cfg      atomic.Pointer[config.Company]
	mounts   []*mounted
	operator *operator
	servers  *supervision
	status   *statusTable
	seats    *seatGate
	// fleet is this node's part in its fleet; nil alone.
	fleet *fleetRun
	// grantPending keeps the OAuth authorizations under way where every
	// node of the fleet reads them, nil alone; grantNews stops hearing
	// the other nodes' grant news (fleet_grants.go).
	grantPending grants.PendingStore
	grantNews    func()
	// pins holds third-party tools no person approved (issue 28);
	// pinsFollowed, set when a goroutine follows the log's decisions, is
	// closed when it has returned.
	pins         *pinning
	pinsFollowed chan struct{}

	// life ends when Close starts: every call the router is serving ends
	// with it, so closing a session never waits on a stuck server.
	life    context.Context
	endLife context.CancelFunc

	applyMu sync.Mutex
	// given is every value the hub redacts: every value any revision has
	// handed out and every grant token the minter has held, under givenMu.
	givenMu   sync.Mutex
	given     map[string]bool
	closeOnce sync.Once
}

// New builds a hub for a company and mounts its first-party servers.
func New(ctx context.Context, opts Options) (*Hub, error) {
	if opts.Company == nil {
		return nil, errors.New("hub: no company")
	}
	opts.ensureDefaults()
	h := &Hub{
		opts:    opts,
		log:     opts.Logger,
		company: NewCatalogue(),
		tokens:  authority.NewTokens(),
		oauth:   oauth.New(nil),
		clean:   opts.Sanitizer,
		seats:   newSeatGate(opts.Leases, opts.Fleet != nil),
	}
	h.status = newStatusTable(h.nodeName())
	var heartbeat time.Duration
	if opts.Fleet != nil {
		heartbeat = opts.Fleet.Heartbeat
	}
	h.life, h.endLife = context.WithCancel(context.Background())
	h.router = &Router{company: h.company, clean: h.clean, log: h.log, life: h.life, callTimeout: h.callTimeout,
		observe: CallObservers(opts.Observers.Calls)}
	sessionKey, err := nodeKey(ctx, opts.Fleet, keyOperatorSessions)
	if err != nil {
		return nil, fmt.Errorf("hub: the fleet's key for operator sessions: %w", err)
	}
	if h.router.seal.key, err = nodeKey(ctx, opts.Fleet, keyInputRounds); err != nil {
		return nil, fmt.Errorf("hub: the fleet's key for input rounds: %w", err)
	}
	h.operator = newOperator(operatorDeps{
		opts: &h.opts, log: h.log, company: h.company, router: h.router, tokens: h.tokens, oauth: h.oauth, control: h,
		changes: newChangeFeed(), sessionKey: sessionKey,
	})
	if opts.Fleet != nil && opts.Fleet.Buckets != nil {
		fs, err := openFleetSessions(ctx, opts.Fleet, h.operator.sessions, h.log)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("hub: the fleet's operator sessions: %w", err)
		}
		h.operator.sessions.fleet = fs
	}
	if err := h.fleetGrants(ctx); err != nil {
		h.Close()
		return nil, err
	}
	minter := h.newGrants()
	h.operator.screen = newScreen(h.operator, h.life.Done(), seatGrants{h})
	h.pins = newPinning(opts.Pins, h.log)
	h.servers = newSupervision(supervisionDeps{
		company: h.company, env: opts.Env, dataDir: opts.DataDir, leases: opts.Leases, log: h.log, events: h.operator, status: h.status,
		ledger: opts.Ledger, acting: h.seats.acting, heartbeat: heartbeat,
		observe: opts.Observers.Servers, hops: opts.Observers.Hops, clean: h.clean, pins: h.pins, grants: minter,
	})
	h.router.seats = h.seatCatalogues
	if minter != nil && opts.Fleet != nil {
		if h.grantNews, err = h.hearGrants(); err != nil {
			h.Close()
			return nil, fmt.Errorf("hub: hear the fleet's grant news: %w", err)
		}
	}
	if opts.Pins != nil {
		// Approving a held tool is a person's call on the operator
		// surface (issue 28); with no log there is nothing to approve on.
		h.opts.FirstParty = append(slices.Clone(h.opts.FirstParty), h.toolChangesServer())
	}
	h.opts.FirstParty = append(slices.Clone(h.opts.FirstParty), h.catalogueServer())
	if opts.Artifacts != nil {
		h.opts.artifactFiles = opts.Artifacts(h.deps("artifacts"))
	}
	if opts.Pages != nil {
		h.opts.pageTrash = opts.Pages(h.deps("knowledge"))
	}
	if err := h.mountFirstParty(ctx); err != nil {
		h.Close()
		return nil, err
	}
	h.operator.toolsChanged()
	// The pins are read before any server files a tool, and followed from
	// then on: a decision on any node releases or holds the tool here.
	// The version is read before the pins, so a decision landing between
	// the two is refiled by Follow, never missed.
	var pinsVersion uint64
	if opts.Pins != nil {
		v, err := opts.Pins.Version()
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("hub: read the tool approvals: %w", err)
		}
		pinsVersion = v
	}
	if err := h.pins.start(ctx, opts.Company); err != nil {
		h.Close()
		return nil, err
	}
	if opts.Pins != nil {
		followed := make(chan struct{})
		h.pinsFollowed = followed
		go func() {
			defer close(followed)
			opts.Pins.Follow(h.life, pinsVersion, h.refreshPins)
		}()
	}
	if err := h.Apply(opts.Company); err != nil {
		h.Close()
		return nil, err
	}
	// Give the shared servers their first start before the hub says it is
	// ready, bounded: a vendor that is down costs its own tools, never the
	// start, and its tools arrive when it comes up.
	wait, cancel := context.WithTimeout(ctx, opts.StartupWait)
	h.servers.awaitStarted(wait)
	cancel()
	if opts.Fleet != nil {
		if err := h.startFleet(); err != nil {
			h.Close()
			return nil, fmt.Errorf("hub: join the fleet's heartbeats: %w", err)
		}
	}
	return h, nil
}

// mountFirstParty connects the company's first-party servers and lists
// their tools side by side, then files them in the order they were given,
// so the catalogue's order does not depend on which answered first.
func (h *Hub) mountFirstParty(ctx context.Context) error {
	type result struct {
		m       *mounted
		entries []Entry
		err     error
	}
	var run []FirstParty
	for _, fp := range h.opts.FirstParty {
		if fp.Enabled != nil && !fp.Enabled(h.opts.Company) {
			reason := fp.Absent
			if reason == "" {
				reason = "the company does not run it"
			}
			h.log.Info("first_party_not_registered", "server", fp.Name, "reason", reason)
			continue
		}
		run = append(run, fp)
	}
	results := make([]result, len(run))
	tasks := make([]func(), len(run))
	for i, fp := range run {
		deps := h.deps(fp.Name)
		tasks[i] = func() {
			m, entries, err := mount(ctx, fp.Name, h.log, func(t servers.Trust) *mcp.Server { return fp.New(t, deps) })
			results[i] = result{m, entries, err}
		}
	}
	fanOut(h.log, "mount first-party servers", tasks...)
	var errs []error
	for i, r := range results {
		if r.m != nil {
			h.mounts = append(h.mounts, r.m)
		}
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.m == nil:
			errs = append(errs, fmt.Errorf("hub: mount %s: it panicked while listing its tools", run[i].Name))
		default:
			if err := h.company.Add(r.entries...); err != nil {
				errs = append(errs, fmt.Errorf("hub: mount %s: %w", run[i].Name, err))
				continue
			}
			h.log.Info("tools_registered", "server", run[i].Name, "source", string(SourceBuiltin), "tools", len(r.entries))
		}
	}
	return errors.Join(errs...)
}

// Apply makes a company revision current: its directory, its operator
// credentials (a token no longer listed stops working on its next request,
// whatever session it belongs to), the secrets redacted from results, and
// its servers. A revision whose credentials do not resolve, or under which
// two tools would carry one name (CAT-12), is refused whole and the current
// one stays.
func (h *Hub) Apply(c *config.Company) error {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	if err := h.check(c); err != nil {
		return err
	}
	if err := h.keepsCredentials(c); err != nil {
		return err
	}
	entries, err := c.OperatorTokens(h.opts.Env)
	if err != nil {
		return err
	}
	secrets := make([]string, 0, len(entries))
	for _, e := range entries {
		secrets = append(secrets, e.Secret)
	}
	if h.opts.Redact != nil {
		secrets = append(secrets, h.opts.Redact()...)
	}
	secrets = append(secrets, c.ReferencedValues(h.opts.Env)...)
	h.redactAlso(secrets...)
	h.tokens.Replace(entries)
	h.oauth.Set(oauthConfig(c))
	h.operator.setPublicURLs(c.PublicURLs())
	h.dir.Store(c.Directory())
	h.cfg.Store(c)
	h.servers.reconcile(c)
	if h.opts.Applied != nil {
		h.opts.Applied(c)
	}
	h.operator.changes.changed()
	h.log.Info("company_applied", "seats", len(h.dir.Load().Seats()), "operator_tokens", len(entries))
	return nil
}

// redactAlso adds values to the one set the hub redacts wherever it
// redacts a ${VAR} value: results, notes, errors, stderr and its log
// (the log handler reads the same sanitiser). A value stays in the set for
// the hub's life: a child of the revision before may still say a
// credential that was just rotated away while it is being stopped, and a
// server may still say a grant's token after it was renewed.
func (h *Hub) redactAlso(values ...string) {
	h.givenMu.Lock()
	defer h.givenMu.Unlock()
	if h.given == nil {
		h.given = map[string]bool{}
	}
	added := false
	for _, v := range values {
		if v != "" && !h.given[v] {
			h.given[v], added = true, true
		}
	}
	if added {
		h.clean.SetSecrets(slices.Collect(maps.Keys(h.given)))
	}
}

// check refuses a revision that would file two tools under one name, as
// far as the tools servers listed so far tell (CAT-12). Only collisions the
// revision brings are refused: one the revision in force already has (a
// server that came up listing a taken name) is reported where it was found,
// and must not stop an unrelated change, such as revoking a token.
func (h *Hub) check(c *config.Company) error {
	listings := h.servers.listings()
	now := map[string]bool{}
	if cur := h.cfg.Load(); cur != nil {
		for _, m := range nameCollisions(cur, h.company.Entries(), listings) {
			now[m] = true
		}
	}
	var v config.Violations
	for _, m := range nameCollisions(c, h.company.Entries(), listings) {
		if !now[m] && !slices.Contains(v, m) {
			v = append(v, m)
		}
	}
	if len(v) > 0 {
		return v
	}
	return nil
}

// keepsCredentials refuses a revision that declares no credential while
// the one in force declares its own. Applied, it would trade every token
// for the generated one and lock out everyone who holds one; a file cut
// short before its api block, or saved half-written, reads exactly like
// that. A hub moves to the generated credential only when it starts.
func (h *Hub) keepsCredentials(c *config.Company) error {
	cur := h.cfg.Load()
	if cur == nil {
		return nil
	}
	_, nowGenerated := cur.Credentials()
	_, nextGenerated := c.Credentials()
	if !nowGenerated && nextGenerated {
		return config.Violations{"api.auth.tokens: this revision declares no operator credential while the one in force declares " +
			"its own; applied, it would replace them all with the generated one and lock out everyone who holds one " +
			"(a file cut short reads like this). Put the tokens back, or restart the hub to move to the generated credential"}
	}
	return nil
}

// Reload re-reads the company through Options.Reload and applies it.
func (h *Hub) Reload() error {
	if h.opts.Reload == nil {
		return errors.New("this hub was started without a way to re-read its company")
	}
	c, err := h.opts.Reload()
	if err != nil {
		return err
	}
	return h.Apply(c)
}

// deps is what the hub lends the first-party server called name.
func (h *Hub) deps(name string) Deps {
	return Deps{Directory: h.Directory, Company: h.Company, Logger: quiet(h.log).With("server", name)}
}

// Directory is the directory of the revision in force.
func (h *Hub) Directory() *authority.Directory { return h.dir.Load() }

// Company is the revision in force.
func (h *Hub) Company() *config.Company { return h.cfg.Load() }

// Catalogue is the company catalogue.
func (h *Hub) Catalogue() *Catalogue { return h.company }

// Router is the hub's call router.
func (h *Hub) Router() *Router { return h.router }

// SeatRegistry is what a seat is offered: its own children's tools, then the
// company's (CAT-10, CAT-11).
func (h *Hub) SeatRegistry(seat string) Registry {
	return SeatRegistry(h.servers.seatCatalogue(seat), h.company)
}

// seatCatalogues lists every seat's own catalogue.
func (h *Hub) seatCatalogues() []*Catalogue {
	var out []*Catalogue
	for _, c := range h.servers.seatCatalogues() {
		out = append(out, c)
	}
	return out
}

// serverRows reports every server the revision in force declares: this
// node's cell, and in a fleet every other node's from its heartbeat.
func (h *Hub) serverRows() []serverRow {
	return h.fleetRows(h.status.rows(h.Company(), h.launchOf))
}

// callTimeout is how long a call to a tool of src may take, by its
// server's entry in the revision in force.
func (h *Hub) callTimeout(src Source) time.Duration {
	if c := h.Company(); c != nil {
		server := serverOf(src)
		for _, s := range c.MCPServers {
			if s.Name == server {
				return s.CallTimeout()
			}
		}
	}
	return config.DefaultCallTimeout
}

// Close stops every in-process server and open operator session. It is safe
// to call more than once. Calls in flight are cut first (each answered that
// the hub is shutting down), since closing a session waits for the calls in
// it, and a call stuck on a server would otherwise hold the close forever.
func (h *Hub) Close() error {
	var errs []error
	h.closeOnce.Do(func() {
		h.endLife()
		// The pins' follower ends with the hub's life; it refiles
		// servers, so it is done before they are stopped.
		if h.pinsFollowed != nil {
			<-h.pinsFollowed
		}
		// The fleet loop first: nothing may claim a seat, or start its
		// children, behind the close.
		h.stopFleet()
		if h.operator != nil {
			h.operator.close()
		}
		if h.servers != nil {
			if h.grantNews != nil {
				h.grantNews()
			}
			if h.servers.grants != nil {
				h.servers.grants.Close()
			}
			h.servers.closeAll()
		}
		for _, m := range h.mounts {
			if err := m.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
