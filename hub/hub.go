package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the hub's version, as it identifies itself in handshakes.
const Version = "0.1.0"

// FirstParty is a first-party server the hub mounts in-process. Its tools
// are filed as builtin.
type FirstParty struct {
	Name string
	// New builds the server; it must believe caller metadata only under the
	// trust it is given.
	New func(servers.Trust, Deps) *mcp.Server
	// Enabled says whether the company runs it (CAT-3, CAT-4); nil means
	// always. A server the company does not run registers no tool at all.
	Enabled func(*config.Company) bool
}

// Leases says which seats this node holds. A per-role child is the seat's
// identity at its vendor, so it is restarted only while this node can prove
// it holds the seat's lease (MCP-10). One node holds every seat: the default.
type Leases interface {
	Holds(seat string) bool
}

type singleNode struct{}

func (singleNode) Holds(string) bool { return true }

// Deps is what the hub lends a first-party server it mounts.
type Deps struct {
	// Directory returns the directory of the revision in force, per call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
}

// Options configure a Hub. The zero value of every field but Company works.
type Options struct {
	Company *config.Company
	// Env resolves ${VAR} references; nil reads nothing.
	Env        config.Lookup
	Logger     *slog.Logger
	FirstParty []FirstParty
	// AllowedHosts are Host header values accepted beside loopback names,
	// for a hub reached through a name (DNS-rebinding protection).
	AllowedHosts []string
	// AllowedOrigins are browser origins accepted beside loopback ones.
	AllowedOrigins []string
	// StartupWait bounds how long New waits for the shared MCP servers'
	// first starts; 10s if 0.
	StartupWait time.Duration
	// MaxBodyBytes bounds an operator request body; 0 means 4 MiB.
	MaxBodyBytes int64
	// Reload re-reads the company for POST /config/reload and SIGHUP; nil
	// means the company cannot be reloaded.
	Reload func() (*config.Company, error)
	// Redact lists further values to redact from tool results (the secret
	// store's), asked on every apply.
	Redact func() []string
	// Leases is the seat-lease check; nil means this node holds every seat.
	Leases Leases
	// ConfigFile is the company file, which PUT /config/mcp-servers writes;
	// empty for the embedded company, which cannot be edited.
	ConfigFile string
}

// Hub is one node's tool plane.
type Hub struct {
	opts    Options
	log     *slog.Logger
	company *Catalogue
	router  *Router
	tokens  *authority.Tokens
	clean   *sanitize.Sanitizer
	dir     atomic.Pointer[authority.Directory]
	cfg     atomic.Pointer[config.Company]
	mounts  []*mounted
	front   *front
	ups     *upstreams

	applyMu   sync.Mutex
	closeOnce sync.Once
}

// New builds a hub for a company and mounts its first-party servers.
func New(ctx context.Context, opts Options) (*Hub, error) {
	if opts.Company == nil {
		return nil, errors.New("hub: no company")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Env == nil {
		opts.Env = func(string) (string, bool) { return "", false }
	}
	if opts.Leases == nil {
		opts.Leases = singleNode{}
	}
	if opts.StartupWait == 0 {
		opts.StartupWait = 10 * time.Second
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	h := &Hub{
		opts:    opts,
		log:     opts.Logger,
		company: NewCatalogue(),
		tokens:  authority.NewTokens(),
		clean:   sanitize.New(),
	}
	h.router = &Router{company: h.company, clean: h.clean, log: h.log}
	h.ups = &upstreams{h: h, byName: map[string]*upstreamServer{}, seats: map[string]*Catalogue{}}
	h.router.seats = h.ups.seatCatalogues
	h.front = newFront(h)
	for _, fp := range opts.FirstParty {
		if fp.Enabled != nil && !fp.Enabled(opts.Company) {
			h.log.Info("first_party_not_registered", "server", fp.Name, "reason", "the company does not run it")
			continue
		}
		deps := Deps{Directory: h.Directory, Logger: quiet(h.log).With("server", fp.Name)}
		m, entries, err := mount(ctx, fp.Name, func(t servers.Trust) *mcp.Server { return fp.New(t, deps) })
		if err != nil {
			h.Close()
			return nil, err
		}
		h.mounts = append(h.mounts, m)
		if err := h.company.Add(entries...); err != nil {
			h.Close()
			return nil, fmt.Errorf("hub: mount %s: %w", fp.Name, err)
		}
		h.log.Info("tools_registered", "server", fp.Name, "source", string(SourceBuiltin), "tools", len(entries))
	}
	h.front.syncTools()
	if err := h.Apply(opts.Company); err != nil {
		h.Close()
		return nil, err
	}
	// Give the shared servers their first start before the hub says it is
	// ready, bounded: a vendor that is down costs its own tools, never the
	// start, and its tools arrive when it comes up.
	wait, cancel := context.WithTimeout(ctx, opts.StartupWait)
	h.ups.awaitStarted(wait)
	cancel()
	return h, nil
}

// Apply makes a company revision current: its directory, its operator
// credentials (a token no longer listed stops working on its next request,
// whatever session it belongs to) and the secrets redacted from results.
// A revision whose credentials do not resolve is refused whole and the
// current one stays.
func (h *Hub) Apply(c *config.Company) error {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
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
	secrets = append(secrets, referencedValues(c, h.opts.Env)...)
	h.tokens.Replace(entries)
	h.clean.SetSecrets(secrets)
	h.dir.Store(c.Directory())
	h.cfg.Store(c)
	h.ups.reconcile(c)
	h.log.Info("company_applied", "seats", len(h.dir.Load().Seats()), "operator_tokens", len(entries))
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

// Directory is the directory of the revision in force.
func (h *Hub) Directory() *authority.Directory { return h.dir.Load() }

// Company is the revision in force.
func (h *Hub) Company() *config.Company { return h.cfg.Load() }

// Catalogue is the company catalogue.
func (h *Hub) Catalogue() *Catalogue { return h.company }

// Router is the hub's call router.
func (h *Hub) Router() *Router { return h.router }

// Close stops every in-process server and open operator session. It is safe
// to call more than once.
func (h *Hub) Close() error {
	var errs []error
	h.closeOnce.Do(func() {
		if h.front != nil {
			h.front.close()
		}
		if h.ups != nil {
			h.ups.closeAll()
		}
		for _, m := range h.mounts {
			if err := m.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
