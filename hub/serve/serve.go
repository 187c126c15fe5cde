// Package serve runs a hub node as `crewlet serve` does: the company (a
// file or the embedded one), the secret store, the operator credential, the
// node's durable state and its search index, the first-party servers, and
// the operator surface on a listener, until its context ends. The command is a thin main over
// Run.
//
// Ownership: Run owns everything it opens and closes it all before it
// returns; it starts no goroutine that outlives it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/sourcegraph/conc"
)

// Options configure Run. The zero value runs the embedded company on
// 127.0.0.1:8420 with its data in ./.crewlet.
type Options struct {
	// ConfigFile is the company file; empty runs the embedded company.
	ConfigFile string
	// Listen is the address to serve on; port 0 picks a free one.
	Listen string
	// DataDir is where the node keeps its data; created mode 0700.
	DataDir string
	// Logger receives the hub's JSON log; nothing is logged if nil.
	Logger *slog.Logger
	// Stdout receives the banner saying where the hub is and where its
	// token is; os.Stdout if nil.
	Stdout io.Writer
	// Reload, each time it delivers, re-reads the company and the secret
	// store: the command hands it its SIGHUP channel.
	Reload <-chan os.Signal
	// LookupEnv reads the process environment; os.LookupEnv if nil.
	LookupEnv config.Lookup
	// Fleet, if set, makes this node one of a fleet; nil runs the
	// embedded single node.
	Fleet *FleetOptions
	// HTTP bounds the HTTP server's timeouts and connections.
	HTTP HTTPLimits
	// SessionIdle closes a 2025 operator session unused this long; the
	// hub's default (30 minutes) if 0.
	SessionIdle time.Duration
	// TLS, when named, serves HTTPS (HTTP/2 included) with this pair; it
	// wins over the company file's api.tls. Each reload reads the pair
	// again.
	TLS TLSFiles
	// MetricsListen, when set, serves GET /metrics on that address too,
	// without a token, for a Prometheus that holds none; the operator
	// listener serves it behind the token either way.
	MetricsListen string

	// onRuntime, in this package's tests, is handed the node's agent
	// runtime once it has started, to claim and release seats by hand.
	onRuntime func(*agent.Runtime)
}

func (o *Options) ensureDefaults() {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8420"
	}
	if o.DataDir == "" {
		o.DataDir = "./.crewlet"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
}

// ShutdownBound is how long a node takes at most to stop once asked.
const ShutdownBound = 10 * time.Second

// Run serves until ctx ends, then shuts down gracefully: open operator
// sessions and servers first, then the listener. It returns an error only
// for a node that could not start or a listener that failed.
func Run(ctx context.Context, o Options) error {
	o.ensureDefaults()
	// One sanitiser redacts tool results and everything the node logs: a
	// server that prints a credential it was given on its stderr, or an
	// error that quotes one, does not put it in the log.
	clean := sanitize.New()
	log := slog.New(sanitize.NewLogHandler(o.Logger.Handler(), clean))
	// A start that is refused does no work first and leaves nothing
	// behind: the company is read, the data directory taken (when it
	// exists), the port bound and the checks made before anything is
	// written, a new data directory made or a seat claimed.
	src := &sources{opts: o}
	company, err := src.company()
	if err != nil {
		return err
	}
	_, statErr := os.Stat(o.DataDir)
	existed := statErr == nil
	var lock *dataDirLock
	if existed {
		// First of all on a directory a node may be running on: a second
		// node must touch nothing of the first's, its children least.
		if lock, err = lockDataDir(o.DataDir); err != nil {
			return err
		}
		defer lock.release()
	}
	ln, err := net.Listen("tcp", o.Listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another program holds that address; give this hub another with --listen (port 0 picks a free one)", err)
	}
	if err != nil {
		return err
	}
	// Closed here on a refusal; once served, Shutdown has closed it and
	// this second Close does nothing.
	defer ln.Close()
	if existed {
		// Its ${VAR}s resolve from the store before the environment.
		if err := src.openStore(); err != nil {
			return err
		}
	}
	// What `config check` reports, checked before anything starts: a
	// problem the node cannot run with stops it here, named as the check
	// names it; the others cost only their part, which says so itself.
	if err := refusals(Preflight(company, Start{ConfigFile: o.ConfigFile, DataDir: o.DataDir, TLS: o.TLS, Env: src.env})); err != nil {
		return err
	}
	if !existed {
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		if lock, err = lockDataDir(o.DataDir); err != nil {
			return err
		}
		defer lock.release()
	}
	// Before any server starts: what a run of this node killed outright
	// left running is ended first.
	ledger, err := upstream.OpenLedger(filepath.Join(o.DataDir, "children.json"), log.With("component", "upstream"))
	if err != nil {
		return err
	}
	// The company as it runs: the store read again and, for a company
	// that reads the generated operator token, the token made.
	if company, err = src.load(); err != nil {
		return err
	}
	var fleet *fleetConn
	if o.Fleet != nil {
		if fleet, err = joinFleet(ctx, o.DataDir, o.Fleet, log); err != nil {
			return err
		}
	}
	node, closeNode, err := openState(ctx, o.DataDir, log, fleet)
	if err != nil {
		fleet.close()
		return err
	}
	// Closed in this order: the hub (every child stopped), the fleet (every
	// seat let go, once nothing acts for it here), the state.
	defer closeNode()
	defer fleet.close()

	// Opened after the node and closed before it: the index follows it.
	indexes, closeIndexes, err := openSearch(ctx, o.DataDir, node, company, src.env, log)
	if err != nil {
		return err
	}
	defer closeIndexes()
	// The pair is read before anything starts, so a wrong path stops the
	// node at once rather than after its servers are up.
	var pair *keyPair
	if files := tlsFiles(o.TLS, company, o.ConfigFile); files.set() {
		if pair, err = loadKeyPair(files); err != nil {
			return err
		}
	}
	reload := func() (*config.Company, error) {
		c, err := src.load()
		if err == nil {
			reloadKeyPair(pair, tlsFiles(o.TLS, c, o.ConfigFile), log)
		}
		return c, err
	}
	// Answers carry the URL an artifact is viewed at, known once the
	// listener is bound.
	var base atomic.Pointer[string]
	baseURL := func() string {
		if b := base.Load(); b != nil {
			return *b
		}
		return ""
	}
	uploads := takesUploads(ctx, node)
	store := agent.NewStore(node)
	// The decisions about seats act on the runtime, which starts after
	// the hub that serves them.
	var running atomic.Pointer[agent.Runtime]
	// answer_knowledge searches through the hub that serves it.
	var started atomic.Pointer[hub.Hub]
	skills := toolSkills(uploads)

	tel, err := openTelemetry(ctx, o, node)
	if err != nil {
		return err
	}
	defer tel.close(log)

	fp := firstParty(node, indexes, uploads, baseURL, agent.BuiltinDeps{Store: store, ToolSkills: skills, Sandbox: codingRuns(o.DataDir, inForce(started.Load, company), log),
		Runtime: running.Load}, running.Load,
		answerDeps(node, src.env, started.Load, running.Load), started.Load, company)
	sessions, err := openScreenSessions(ctx, node)
	if err != nil {
		return fmt.Errorf("opening the screen's sign-ins: %w", err)
	}
	grantStore, err := secrets.OpenGrants(o.DataDir)
	if err != nil {
		return fmt.Errorf("opening the seats' OAuth grants: %w", err)
	}
	hopts := hub.Options{
		Company: company,
		// The resource identity when api.public_url is unset.
		ListenURL:   baseURL,
		Env:         src.env,
		DataDir:     storeDir(o.DataDir),
		Logger:      log,
		Reload:      reload,
		Applied:     indexes.applied,
		Redact:      src.storedValues,
		ConfigFile:  o.ConfigFile,
		FirstParty:  fp,
		Artifacts:   artifactFiles(node, uploads, baseURL),
		Pages:       pageTrash(node),
		Sanitizer:   clean,
		Ledger:      ledger,
		SessionIdle: o.SessionIdle,
		Observers:   tel.observers(),
		Metrics:     tel.metrics.Handler(),
		SecretNames: src.secretNames,
		// The approvals of third-party tools are on the log, so every node
		// of a fleet holds and releases the same tools (issue 28).
		Pins:           toolpin.NewStore(node),
		ScreenSessions: sessions,
		Grants:         grantStore,
	}
	if fleet != nil {
		hopts.Fleet = fleet.hubFleet()
	}
	h, err := hub.New(ctx, hopts)
	if err != nil {
		return err
	}
	defer h.Close()
	started.Store(h)
	tel.reads(h)
	// Seats are claimed and their turns run before the node listens: a
	// mention made the moment it answers already has a mailbox to land in.
	rt, err := startRuntime(ctx, h, runtimeDeps{store: store, node: node, company: company, env: src.env, log: log, toolSkills: skills,
		fleet: fleet != nil, observer: tel.metrics})
	if err != nil {
		return err
	}
	// Closed before the hub: a turn in flight is cut, and stays running
	// on the log to be run again, rather than ending on the hub's
	// shutting-down refusals.
	defer rt.Close()
	running.Store(rt)
	if o.onRuntime != nil {
		o.onRuntime(rt)
	}

	addr := ln.Addr().String()
	scheme := "http"
	if pair != nil {
		scheme = "https"
	}
	baseAddr := scheme + "://" + addr
	base.Store(&baseAddr)
	if err := os.WriteFile(filepath.Join(o.DataDir, "listen-addr"), []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	nofile, err := raiseFileLimit()
	if err != nil {
		log.Warn("file_limit_not_raised", "error", err.Error(), "open_file_limit", nofile)
	}
	o.HTTP.ensureDefaults()
	log.Info("connection_cap", "max_conns", o.HTTP.MaxConns, "open_file_limit", nofile)
	handler := tel.watch(h.Handler())
	if pair != nil {
		handler = hsts(handler)
	}
	srv, ln := newHTTPServer(handler, ln, o.HTTP, log)
	served := make(chan error, 2)
	var wg conc.WaitGroup
	defer wg.Wait()
	if pair != nil {
		srv.TLSConfig = pair.config()
		wg.Go(func() { served <- srv.ServeTLS(ln, "", "") })
	} else {
		wg.Go(func() { served <- srv.Serve(ln) })
	}
	if o.MetricsListen != "" {
		msrv, err := tel.serveMetrics(o.MetricsListen, o.HTTP, log, &wg, served)
		if err != nil {
			return err
		}
		defer msrv.Close()
		log.Info("metrics_listening", "addr", msrv.Addr)
	}

	log.Info("hub_listening", "addr", addr, "mcp_url", baseAddr+"/operator/mcp", "data_dir", o.DataDir, "tls", pair != nil)
	fleetNote := ""
	if fleet != nil {
		fleetNote = fmt.Sprintf("%s (%d copies of the log)", o.Fleet.Cluster.Node, fleet.js.Replicas())
	}
	idle := seatsWithoutModel(company, src.env)
	logModelless(log, idle)
	notes := modelNotes(idle, o.ConfigFile)
	if n := sandboxNote(log); n != "" {
		notes = append(notes, n)
	}
	// What waits for a ${VAR} (a server, a provider's key) is said where
	// a person looks first, as config check says it.
	for _, p := range Preflight(company, Start{ConfigFile: o.ConfigFile, DataDir: o.DataDir, Env: src.env}) {
		if !p.Refuses {
			notes = append(notes, p.Text)
		}
	}
	banner(o.Stdout, addr, baseAddr, src.tokenNote(), fleetNote, notes)

	for {
		select {
		case <-o.Reload:
			if err := h.Reload(); err != nil {
				log.Error("config_reload_failed", "error", err.Error())
			}
		case err := <-served:
			return err
		case <-ctx.Done():
			log.Info("hub_stopping")
			shutdown, cancel := context.WithTimeout(context.Background(), ShutdownBound)
			defer cancel()
			// The turns first, then the hub: it cuts the calls in
			// flight, each answered that the hub is shutting down, and
			// ends the open sessions, whose streams Shutdown would
			// otherwise wait for.
			rt.Close()
			h.Close()
			if err := srv.Shutdown(shutdown); err != nil {
				// Whatever is still being answered when the bound runs
				// out is cut: the bound is the operator's, not a
				// client's.
				_ = srv.Close()
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				log.Warn("hub_stopped_connections", "reason", "still open when the shutdown bound ran out", "bound", ShutdownBound.String())
			}
			return nil
		}
	}
}

// banner says where the hub is and where its token is, never the token,
// what each seat without a model lacks, and each ${VAR} that something
// waits for. The endpoint line is printed
// last: scripts wait for it.
func banner(w io.Writer, addr, base, tokenNote, fleetNote string, seatNotes []string) {
	fmt.Fprintf(w, "Crewlet hub %s listening on %s\n", hub.Version, addr)
	if tokenNote != "" {
		fmt.Fprintf(w, "  operator token: %s (send it as Authorization: Bearer <token>)\n", tokenNote)
	}
	if fleetNote != "" {
		fmt.Fprintf(w, "  fleet node: %s\n", fleetNote)
	}
	for _, n := range seatNotes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "  MCP endpoint: %s/operator/mcp\n", base)
}
