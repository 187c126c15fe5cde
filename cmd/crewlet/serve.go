package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/crewlet/hub/cmd/internal/cli"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/serve"
	"github.com/crewlet/hub/servers/state"
)

// fleetFlagNames are serve's flags that make the node one of a fleet,
// listed apart in its usage.
var fleetFlagNames = []string{"node", "cluster-listen", "cluster-peers", "cluster-advertise", "cluster-tls-cert", "cluster-tls-key", "cluster-tls-ca",
	"cluster-insecure-loopback", "nats", "nats-creds", "replicas", "lease-ttl", "heartbeat"}

// serveCommand is `crewlet serve`: flags, signals, and serve.Run.
func serveCommand() *cli.Command {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "company `FILE` (YAML); without one the embedded default company runs")
	listen := fs.String("listen", "127.0.0.1:8420", "`ADDR` to listen on; port 0 picks a free one")
	dataDir := fs.String("data-dir", serve.DefaultDataDir, "the `DIR` the hub keeps its data in")
	debug := fs.Bool("debug", false, "log at debug level")
	node := fs.String("node", "", "this node's `NAME` in a fleet (with --cluster-listen or --nats)")
	clusterListen := fs.String("cluster-listen", "", "join a fleet: the embedded NATS server's route address (`ADDR`, host:port)")
	clusterPeers := fs.String("cluster-peers", "", "the other nodes' route `ADDRS`, comma-separated")
	clusterAdvertise := fs.String("cluster-advertise", "", "the route address (`ADDR`) peers reach this node at, when not --cluster-listen")
	clusterTLSCert := fs.String("cluster-tls-cert", "", "speak TLS on the routes with this node's certificate `FILE` (PEM), with --cluster-tls-key and --cluster-tls-ca")
	clusterTLSKey := fs.String("cluster-tls-key", "", "the private key `FILE` (PEM) of --cluster-tls-cert")
	clusterTLSCA := fs.String("cluster-tls-ca", "", "the CA `FILE` (PEM) every node's route certificate is signed by; a route without one is refused")
	insecureLoopback := fs.Bool("cluster-insecure-loopback", false, "run an embedded fleet without CREWLET_CLUSTER_SECRET, for nodes whose route addresses are all on this machine (tests)")
	natsURL := fs.String("nats", "", "join a fleet through an operator's NATS (comma-separated `URLS`); no embedded server")
	natsCreds := fs.String("nats-creds", "", "a NATS credentials `FILE` for --nats")
	replicas := fs.Int("replicas", 0, "copies of the log and buckets a fleet keeps (default 3, or the nodes an embedded fleet has if fewer)")
	leaseTTL := fs.Duration("lease-ttl", state.DefaultLeaseTTL, "how long a seat's lease lives without a renewal (whole seconds)")
	heartbeat := fs.Duration("heartbeat", state.DefaultHeartbeat, "how often a node of a fleet renews its leases and publishes its heartbeat")
	sessionIdle := fs.Duration("session-idle", hub.DefaultSessionIdle, "close a 2025 MCP session no request has used for this long")
	maxConns := fs.Int("max-conns", 0, "serve at most this many HTTP connections at once (each 2025 session's event stream holds one; one past it is answered 503); 0: three quarters of the open-file limit")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS (HTTP/2 included) with this certificate `FILE` (PEM); with --tls-key; re-read on SIGHUP")
	tlsKey := fs.String("tls-key", "", "the private key `FILE` (PEM) of --tls-cert")
	metricsListen := fs.String("metrics-listen", "", "also serve GET /metrics on this `ADDR`, without a token (the operator listener serves it behind the token)")
	return &cli.Command{
		Name:    "serve",
		Flags:   fs,
		Groups:  []cli.FlagGroup{{Title: "fleet flags (a node of a fleet: --node with --cluster-listen or --nats)", Names: fleetFlagNames}},
		Summary: "Run the hub: the company, its first-party servers and seats, the operator surface at /operator/mcp.",
		Run: func([]string) error {
			fleet, err := fleetFlags(fleetArgs{node: *node, listen: *clusterListen, peers: *clusterPeers, advertise: *clusterAdvertise,
				tlsCert: *clusterTLSCert, tlsKey: *clusterTLSKey, tlsCA: *clusterTLSCA, insecureLoopback: *insecureLoopback,
				nats: *natsURL, creds: *natsCreds, replicas: *replicas, leaseTTL: *leaseTTL, heartbeat: *heartbeat, set: setFlags(fs)})
			if err != nil {
				// Flags that do not go together are a command line to
				// fix, said with the usage, as an unknown flag is.
				return cli.UsageError{Msg: err.Error()}
			}
			// The GC target follows the live heap (gc_target.go); GOGC,
			// when set, wins.
			if os.Getenv("GOGC") == "" {
				stop := startGCTarget()
				defer stop()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			return serve.Run(ctx, serve.Options{
				ConfigFile:    *cfgPath,
				Listen:        *listen,
				DataDir:       *dataDir,
				Logger:        newLogger(*debug),
				Reload:        hup,
				SessionIdle:   *sessionIdle,
				MetricsListen: *metricsListen,
				HTTP:          serve.HTTPLimits{MaxConns: *maxConns},
				TLS:           serve.TLSFiles{CertFile: *tlsCert, KeyFile: *tlsKey},
				Fleet:         fleet,
			})
		},
	}
}

// fleetArgs are the fleet's flags as given.
type fleetArgs struct {
	node, listen, peers, advertise, nats, creds string
	tlsCert, tlsKey, tlsCA                      string
	insecureLoopback                            bool
	replicas                                    int
	leaseTTL, heartbeat                         time.Duration
	set                                         map[string]bool
}

// fleetFlags reads the fleet's flags: nil (the embedded single node) when
// neither way of joining is given, and an error for a fleet flag given
// without one.
func fleetFlags(a fleetArgs) (*serve.FleetOptions, error) {
	if a.listen == "" && a.nats == "" {
		for _, f := range []string{"node", "cluster-peers", "cluster-advertise", "cluster-tls-cert", "cluster-tls-key", "cluster-tls-ca",
			"cluster-insecure-loopback", "nats-creds", "replicas", "lease-ttl", "heartbeat"} {
			if a.set[f] {
				return nil, fmt.Errorf("--%s is for a node of a fleet: give --cluster-listen or --nats too", f)
			}
		}
		return nil, nil
	}
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	f := &serve.FleetOptions{
		Cluster: state.Cluster{Node: a.node, Listen: a.listen, Peers: split(a.peers), Advertise: a.advertise,
			URLs: split(a.nats), Creds: a.creds, Replicas: a.replicas,
			// The routes' shared secret is never a flag: a flag shows in ps.
			Secret: os.Getenv("CREWLET_CLUSTER_SECRET"), InsecureLoopback: a.insecureLoopback},
		LeaseTTL:  a.leaseTTL,
		Heartbeat: a.heartbeat,
	}
	if a.tlsCert != "" || a.tlsKey != "" || a.tlsCA != "" {
		f.Cluster.TLS = &state.RouteTLS{CertFile: a.tlsCert, KeyFile: a.tlsKey, CAFile: a.tlsCA}
	}
	if a.node == "" {
		return nil, errors.New("--node names this node in the fleet; it is required with --cluster-listen or --nats")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// setFlags names the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
