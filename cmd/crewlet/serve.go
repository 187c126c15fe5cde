package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	runtimedebug "runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokenVar is the variable the embedded default company reads its operator
// token from.
const tokenVar = "CREWLET_OPERATOR_TOKEN"

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "company file (YAML); without one the embedded default company runs")
	listen := fs.String("listen", "127.0.0.1:8420", "address to listen on; port 0 picks a free one")
	dataDir := fs.String("data-dir", "./.crewlet", "where the hub keeps its data")
	debug := fs.Bool("debug", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The hub holds little memory but allocates a lot per forwarded call
	// (every JSON message it parses); a higher GC target trades a little
	// heap for much less collection. GOGC, when set, wins.
	if os.Getenv("GOGC") == "" {
		runtimedebug.SetGCPercent(400)
	}
	log := newLogger(*debug)

	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	// ${VAR} resolves from the secret store first, then the environment.
	// Every load re-reads the store, so `crewlet secrets set` followed by a
	// reload reaches the servers that reference it.
	var store atomic.Pointer[secrets.Store]
	openStore := func() error {
		s, err := secrets.Open(*dataDir)
		if err != nil {
			return err
		}
		store.Store(s)
		return nil
	}
	if err := openStore(); err != nil {
		return err
	}
	var generated string
	env := func(k string) (string, bool) {
		if v, ok := store.Load().Lookup(k); ok {
			return v, true
		}
		if k == tokenVar && generated != "" {
			return generated, true
		}
		return os.LookupEnv(k)
	}
	readCompany := func() (*config.Company, error) { return loadCompany(*cfgPath) }
	tokenNote := ""
	if *cfgPath == "" {
		readCompany = func() (*config.Company, error) { return config.Default(), nil }
		tok, where, err := defaultToken(*dataDir)
		if err != nil {
			return err
		}
		tokenNote, generated = where, tok
	}
	load := func() (*config.Company, error) {
		if err := openStore(); err != nil {
			return nil, err
		}
		return readCompany()
	}
	company, err := load()
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The node's durable log and projection, for the native tracker. Opened
	// only when the company runs it: a company on a vendor tracker gets no
	// tracker tools at all (CAT-4).
	var node *state.Node
	if company.TrackerBackend() == "native" {
		node, err = state.Open(ctx, state.Options{
			Dir:        filepath.Join(*dataDir, "state"),
			Logger:     log.With("component", "state"),
			Projectors: tracker.Projectors(),
		})
		if err != nil {
			return fmt.Errorf("opening the node's state: %w", err)
		}
		defer node.Close()
	}
	native := func(c *config.Company) bool { return node != nil && c.TrackerBackend() == "native" }

	h, err := hub.New(ctx, hub.Options{
		Company: company,
		Env:     env,
		Logger:  log,
		Reload:  load,
		// Every stored secret is redacted from tool results.
		Redact:     func() []string { return store.Load().Values() },
		ConfigFile: *cfgPath,
		FirstParty: []hub.FirstParty{{
			Name: "builtins",
			New: func(t servers.Trust, d hub.Deps) *mcp.Server {
				return agent.NewBuiltinServer(d.Directory, t, d.Logger)
			},
		}, {
			Name:    "tracker",
			Enabled: native,
			New: func(t servers.Trust, d hub.Deps) *mcp.Server {
				return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, t)
			},
		}},
	})
	if err != nil {
		return err
	}
	defer h.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if err := os.WriteFile(filepath.Join(*dataDir, "listen-addr"), []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	log.Info("hub_listening", "addr", addr, "mcp_url", "http://"+addr+"/operator/mcp", "data_dir", *dataDir)
	fmt.Printf("Crewlet hub %s listening on %s\n", hub.Version, addr)
	if tokenNote != "" {
		fmt.Printf("  operator token: %s (send it as Authorization: Bearer <token>)\n", tokenNote)
	}
	// Printed last: scripts wait for this line.
	fmt.Printf("  MCP endpoint: http://%s/operator/mcp\n", addr)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if err := h.Reload(); err != nil {
				log.Error("config_reload_failed", "error", err.Error())
			}
		case err := <-served:
			return err
		case <-ctx.Done():
			log.Info("hub_stopping")
			shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Open sessions hold long-lived streams: close them first so
			// Shutdown does not wait on them.
			h.Close()
			if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
}

// defaultToken returns the operator token of the embedded company: the
// environment's if set, else the one kept in the data directory, else a new
// one written there readable by the owner only. It says where the token is,
// never the token itself.
func defaultToken(dir string) (token, where string, err error) {
	if v, ok := os.LookupEnv(tokenVar); ok && strings.TrimSpace(v) != "" {
		return v, "from $" + tokenVar, nil
	}
	path := filepath.Join(dir, "operator-token")
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), path, nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	token = "crw_" + base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write operator token: %w", err)
	}
	return token, path, nil
}
