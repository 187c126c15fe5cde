// Package standalone runs one first-party server on its own, over stdio or
// streamable HTTP, for developing against it and testing it with any MCP
// client: the same server the hub mounts, with its own state node and data
// directory. Every first-party server's command (crewlet tracker-mcp, ...)
// is this package with that server's constructor.
//
// Ownership: Run owns the state node, what the server's Open hook opens
// beside it (a search index), the HTTP listener and the goroutine serving
// it; all are released before it returns, the hook's before the node.
package standalone

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/atomicfile"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// Server is a first-party server as the standalone runner needs it.
type Server struct {
	// Name is the server's name, e.g. tracker: its command is
	// Name-mcp and its default data directory ./.crewlet-Name.
	Name string
	// Projectors are the server's projectors for its state node.
	Projectors []state.Projector
	// Open, if set, opens what the server keeps beside its state node (a
	// search index) once the node is open. deps is handed to New; closer
	// is closed when Run ends, before the node.
	Open func(ctx context.Context, r Resources) (deps any, closer io.Closer, err error)
	// New builds the server over node, believing callers under trust;
	// deps is what Open answered (nil without Open).
	New func(node *state.Node, dir func() *authority.Directory, log *slog.Logger, trust servers.Trust, deps any) *mcp.Server
}

// Resources are what a server's Open hook is lent.
type Resources struct {
	Node *state.Node
	// DataDir is the server's own data directory (the node's is
	// DataDir/state).
	DataDir string
	Logger  *slog.Logger
	// Embedder is the company's embeddings model (models.embeddings), or
	// nil when it configures none.
	Embedder search.Embedder
}

// Options are what the command hands the runner besides its arguments.
type Options struct {
	// Directory loads the company's seats and units from a company file;
	// "" means the embedded default company.
	Directory func(configFile string) (*authority.Directory, error)
	// Embedder makes the company file's embeddings model, resolving its
	// ${VAR}s with getenv; nil (or a nil answer) means none, and search is
	// keyword only.
	Embedder func(configFile string, getenv func(string) string) (search.Embedder, error)
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Stdin and Stdout carry the MCP stream over stdio; Stdout also takes
	// the listening line over HTTP. Logs go to Stderr. nil: the process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

func (o *Options) ensureDefaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
}

// Usage is the flags every standalone server takes.
const Usage = "[--http ADDR] [--data-dir DIR] [--config FILE] [--as HANDLE] [--trusted-caller-env VAR] [-debug]"

// Run parses args and serves srv until ctx ends (or, over stdio, the
// client goes away).
//
// Who a call is from: a call naming a caller in its metadata is believed
// only from a client presenting the token in $CREWLET_TRUSTED_CALLER (in
// _meta crewlet/proof, or as the HTTP bearer). With --as HANDLE a call that
// names no caller acts as that seat: over stdio always, since whoever
// started the process chose the seat; over HTTP only for a client
// presenting the token, so nobody else on the network gets it.
func Run(ctx context.Context, srv Server, args []string, opts Options) error {
	opts.ensureDefaults()
	fs := flag.NewFlagSet(srv.Name+"-mcp", flag.ContinueOnError)
	fs.SetOutput(opts.Stderr)
	a := Flags(fs, srv.Name)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return Serve(ctx, srv, *a, opts)
}

// Args are the flags every standalone server takes, parsed.
type Args struct {
	HTTP, DataDir, Config, As, TrustEnv string
	Debug                               bool
}

// Flags defines the flags every standalone server takes on fs, for Run or
// for a command that reads its command line itself (crewlet's, which
// answers --help and a bad flag as all its commands do).
func Flags(fs *flag.FlagSet, name string) *Args {
	a := &Args{}
	fs.StringVar(&a.HTTP, "http", "", "serve streamable HTTP on this `ADDR` instead of stdio; port 0 picks one (written to DIR/listen-addr)")
	fs.StringVar(&a.DataDir, "data-dir", "./.crewlet-"+name, "the server's own data `DIR`")
	fs.StringVar(&a.Config, "config", "", "company `FILE` for the directory of seats and units; the embedded default without one")
	fs.StringVar(&a.As, "as", "", "a seat `HANDLE`: calls that name no caller act as this seat (over HTTP only with the trusted token)")
	fs.StringVar(&a.TrustEnv, "trusted-caller-env", "CREWLET_TRUSTED_CALLER", "environment variable (`VAR`) holding the token a trusted caller presents (in _meta crewlet/proof, or as the HTTP bearer token)")
	fs.BoolVar(&a.Debug, "debug", false, "log at debug level")
	return a
}

// Serve serves srv as a's flags say until ctx ends (or, over stdio, the
// client goes away).
func Serve(ctx context.Context, srv Server, a Args, opts Options) error {
	opts.ensureDefaults()
	// Read below as the flag package's pointers they were.
	httpAddr, dataDir, cfgPath, as, trustEnv, debug := &a.HTTP, &a.DataDir, &a.Config, &a.As, &a.TrustEnv, &a.Debug
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(opts.Stderr, &slog.HandlerOptions{Level: level}))

	dir, err := opts.Directory(*cfgPath)
	if err != nil {
		return err
	}
	var emb search.Embedder
	if opts.Embedder != nil {
		if emb, err = opts.Embedder(*cfgPath, opts.Getenv); err != nil {
			return err
		}
		if c, ok := emb.(io.Closer); ok {
			defer c.Close()
		}
	}
	proof := opts.Getenv(*trustEnv)
	trust := servers.TrustProof(proof)
	switch {
	case *as != "":
		c, err := seatCaller(dir, *as)
		if err != nil {
			return err
		}
		if *httpAddr != "" && proof == "" {
			// Over HTTP the seat goes only to a client presenting the
			// token; without one it would go to nobody.
			return fmt.Errorf("--as over --http needs %s set to the token a client presents as its bearer", *trustEnv)
		}
		trust = trust.As(c, *httpAddr == "")
	case proof == "":
		// Refused rather than run trusting nobody: every call would be
		// refused, which looks like a broken server.
		return fmt.Errorf("set %s to the token the trusted caller presents, or name a seat to act as with --as", *trustEnv)
	}

	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return err
	}
	node, err := state.Open(ctx, state.Options{Dir: filepath.Join(*dataDir, "state"), Logger: log, Projectors: srv.Projectors})
	if err != nil {
		return fmt.Errorf("opening %s's state: %w", srv.Name, err)
	}
	defer node.Close()
	// The SDK narrates every session at info; below -debug only its
	// warnings and the server's own errors are worth a line.
	serverLog := log
	if !*debug {
		serverLog = slog.New(slog.NewJSONHandler(opts.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var deps any
	if srv.Open != nil {
		var closer io.Closer
		deps, closer, err = srv.Open(ctx, Resources{Node: node, DataDir: *dataDir, Logger: log, Embedder: emb})
		if err != nil {
			return fmt.Errorf("opening %s: %w", srv.Name, err)
		}
		if closer != nil {
			// Deferred after the node's Close, so it runs first.
			defer closer.Close()
		}
	}
	server := srv.New(node, func() *authority.Directory { return dir }, serverLog, trust, deps)

	if *httpAddr == "" {
		err := server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(opts.Stdin), Writer: nopWriteCloser{opts.Stdout}})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return serveHTTP(ctx, server, *httpAddr, *dataDir, opts.Stdout, srv.Name)
}

// seatCaller is who a call acts as under --as: the seat, as a person or as
// an agent seat. An agent seat's writes belong to a turn, so the process
// is one turn: a call repeated within it is the same operation.
func seatCaller(dir *authority.Directory, handle string) (authority.Caller, error) {
	seat, ok := dir.Seat(handle)
	if !ok {
		return authority.Caller{}, fmt.Errorf("--as %s: nobody in the company has that handle", handle)
	}
	c := authority.Caller{Seat: seat.Handle, Requester: seat.Handle, OperatorID: "standalone"}
	if seat.Kind == authority.SeatAgent {
		var turn [8]byte
		if _, err := rand.Read(turn[:]); err != nil {
			return authority.Caller{}, err
		}
		c.Kind, c.TurnKey, c.OperatorID = authority.KindAgent, "standalone-"+hex.EncodeToString(turn[:]), ""
	} else {
		c.Kind = authority.KindHuman
	}
	return c, nil
}

func serveHTTP(ctx context.Context, server *mcp.Server, addr, dataDir string, out io.Writer, name string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	bound := ln.Addr().String()
	// Written whole by rename, so a watcher never reads a half-written address.
	if err := atomicfile.Write(filepath.Join(dataDir, "listen-addr"), []byte(bound+"\n"), 0o600); err != nil {
		ln.Close()
		return err
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	fmt.Fprintf(out, "%s MCP server on http://%s/\n", name, bound)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A connection a client dialled but never used counts as busy for
		// several seconds; past the grace period the rest is cut.
		if hs.Shutdown(shutdown) != nil {
			hs.Close()
		}
		<-done
		return nil
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
