package state

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster says how a node of a fleet reaches the one NATS JetStream the
// fleet shares: its embedded server routed to its peers' (Listen, Peers),
// or a NATS deployment the operator runs (URLs). Either way the log, the
// blob store and the coordination buckets are replicated Replicas times,
// and every node projects the one log into its own store.
type Cluster struct {
	// Node names this node in the fleet: its server's name, the holder
	// written on its leases, the sender of its heartbeats. Unique.
	Node string
	// Listen is the embedded server's route address (host:port).
	Listen string
	// Peers are the other nodes' route addresses.
	Peers []string
	// Advertise is the route address peers are told to reach this node
	// at, when it is not Listen (a node behind NAT or a proxy).
	Advertise string
	// URLs are an operator's NATS servers; set, no server is embedded.
	URLs []string
	// Creds is the credentials file for URLs (a NATS .creds file).
	Creds string
	// Secret is what every embedded node of the fleet shares to
	// authenticate its routes. An embedded fleet needs one: a route port
	// that answers anybody hands whoever reaches it the company's whole
	// log (work items, arguments, decisions).
	Secret string
	// InsecureLoopback runs an embedded fleet without a Secret, allowed
	// only when every route address is a loopback one: nodes on one
	// machine, as tests run them.
	InsecureLoopback bool
	// TLS, if set, makes the routes speak TLS, each node's certificate
	// verified against the fleet's CA in both directions.
	TLS *RouteTLS
	// Replicas is how many copies of the log and of each bucket the fleet
	// keeps. Zero: three, or as many nodes as an embedded fleet has when
	// it has fewer.
	Replicas int
	// Ready bounds how long OpenCluster waits for the fleet to form (a
	// leader elected, enough peers for the replicas); 2 minutes if zero.
	Ready time.Duration
}

// RouteTLS is the PEM files of a node's route certificate, its key and the
// CA every node's route certificate is signed by.
type RouteTLS struct {
	CertFile, KeyFile, CAFile string
}

// minSecret is the shortest route secret taken: a secret is guessed
// through the route port, with nothing slowing the guesses.
const minSecret = 16

// nodeName is what a node may be called: it becomes a NATS server name and
// part of the subjects its heartbeats go on.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// Embedded reports whether the node runs its own server (no URLs).
func (c Cluster) Embedded() bool { return len(c.URLs) == 0 }

// EffectiveReplicas is Replicas, or its default.
func (c Cluster) EffectiveReplicas() int {
	if c.Replicas > 0 {
		return c.Replicas
	}
	if c.Embedded() {
		return min(3, 1+len(c.Peers))
	}
	return 3
}

// Validate reports every problem at once.
func (c Cluster) Validate() error {
	var errs []error
	if !nodeName.MatchString(c.Node) {
		errs = append(errs, fmt.Errorf("the node name %q must be 1 to 63 letters, digits, '-' or '_', starting with a letter or digit", c.Node))
	}
	if c.Embedded() {
		if _, _, err := hostPort(c.Listen); err != nil {
			errs = append(errs, fmt.Errorf("the cluster listen address: %w", err))
		}
		if len(c.Peers) == 0 {
			errs = append(errs, errors.New("a fleet with an embedded server needs at least one peer's route address"))
		}
		for _, p := range c.Peers {
			if _, _, err := hostPort(p); err != nil {
				errs = append(errs, fmt.Errorf("peer %q: %w", p, err))
			}
		}
		if c.Advertise != "" {
			if _, _, err := hostPort(c.Advertise); err != nil {
				errs = append(errs, fmt.Errorf("the advertised route address: %w", err))
			}
		}
		if c.Creds != "" {
			errs = append(errs, errors.New("a credentials file is for an operator's NATS (URLs), not the embedded server"))
		}
		errs = append(errs, c.routeAuthProblems()...)
	} else if c.Listen != "" || len(c.Peers) > 0 || c.Advertise != "" {
		errs = append(errs, errors.New("an operator's NATS and an embedded server's routes are two ways to join a fleet; give one"))
	} else if c.InsecureLoopback || c.TLS != nil {
		errs = append(errs, errors.New("route security is for an embedded fleet's routes; an operator's NATS keeps its own (a creds file, its TLS)"))
	}
	for _, u := range c.URLs {
		if pu, err := url.Parse(u); err != nil || pu.Host == "" {
			// The URL may carry a password: say which one by position only.
			errs = append(errs, fmt.Errorf("NATS URL #%d is not a URL like nats://host:4222", indexOf(c.URLs, u)+1))
		}
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d: JetStream keeps 1 to 5 copies", c.Replicas))
	}
	return errors.Join(errs...)
}

// routeAuthProblems says what keeps an embedded fleet's routes from
// admitting only its own nodes.
func (c Cluster) routeAuthProblems() []error {
	var errs []error
	switch {
	case c.Secret != "" && c.InsecureLoopback:
		errs = append(errs, errors.New("a cluster secret and --cluster-insecure-loopback contradict each other; keep the secret"))
	case c.Secret != "" && len(c.Secret) < minSecret:
		errs = append(errs, fmt.Errorf("the cluster secret is %d characters; a route port takes guesses at it as fast as they come, so give at least %d (openssl rand -hex 32 makes one)", len(c.Secret), minSecret))
	case c.Secret == "" && !c.InsecureLoopback:
		errs = append(errs, errors.New("an embedded fleet's routes need a shared secret, or anyone who reaches a route port reads the company's log: set CREWLET_CLUSTER_SECRET to the same long random value on every node (openssl rand -hex 32 makes one); nodes that all run on this machine may use --cluster-insecure-loopback instead"))
	case c.InsecureLoopback:
		for _, a := range append([]string{c.Listen, c.Advertise}, c.Peers...) {
			if a == "" {
				continue
			}
			if h, _, err := hostPort(a); err == nil && !loopback(h) {
				errs = append(errs, fmt.Errorf("--cluster-insecure-loopback is for route addresses on this machine only, and %q is not a loopback address: set CREWLET_CLUSTER_SECRET instead", a))
			}
		}
	}
	if t := c.TLS; t != nil && (t.CertFile == "" || t.KeyFile == "" || t.CAFile == "") {
		errs = append(errs, errors.New("route TLS needs all three of a certificate, its key and the fleet's CA (--cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca)"))
	}
	return errs
}

// loopback reports whether a route host is this machine by address (a
// name could resolve anywhere).
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func hostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q has no valid port", addr)
	}
	return h, port, nil
}

// fleetName is the NATS cluster name every embedded node of a fleet shares.
const fleetName = "crewlet"

// OpenCluster joins the fleet and opens the shared log: the embedded server
// (store under dir) routed to the peers, or a connection to the operator's
// NATS. It returns once the log exists with its replicas, which needs enough
// nodes up to elect a leader, within c.Ready.
func OpenCluster(ctx context.Context, dir string, c Cluster) (*JetStreamLog, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Ready <= 0 {
		c.Ready = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, c.Ready)
	defer cancel()
	cfg := logConfig{
		replicas: c.EffectiveReplicas(),
		subjects: []string{streamSubject, claimPrefix + "*"},
	}
	if c.Embedded() {
		host, port, _ := hostPort(c.Listen)
		var routes []*url.URL
		for _, p := range c.Peers {
			u := &url.URL{Scheme: "nats", Host: p}
			if c.Secret != "" {
				u.User = url.UserPassword(fleetName, c.Secret)
			}
			routes = append(routes, u)
		}
		// A server routes only once its client port listens (DontListen
		// would keep it from ever routing), so it listens on loopback, on a
		// port of its own choosing, for this process alone: a client must
		// present a token nobody else is given.
		var tok [24]byte
		_, _ = rand.Read(tok[:])
		token := hex.EncodeToString(tok[:])
		cfg.server = &server.Options{
			ServerName:    c.Node,
			Host:          "127.0.0.1",
			Port:          server.RANDOM_PORT,
			Authorization: token,
			JetStream:     true,
			StoreDir:      dir,
			SyncAlways:    true,
			NoSigs:        true,
			NoLog:         true,
			MaxPayload:    8 << 20,
			Cluster: server.ClusterOpts{
				Name:      fleetName,
				Host:      host,
				Port:      port,
				Advertise: c.Advertise,
				// Clients have nothing to learn from the fleet's routes.
				// (A configured peer that is not up yet is dialled again
				// until it is.)
				NoAdvertise: true,
			},
			Routes: routes,
		}
		if c.Secret != "" {
			cfg.server.Cluster.Username, cfg.server.Cluster.Password = fleetName, c.Secret
		}
		if t := c.TLS; t != nil {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: true})
			if err != nil {
				return nil, fmt.Errorf("route TLS: %w", err)
			}
			// A node is both the server and the client of its routes: it
			// checks a peer's certificate against the CA either way, as
			// nats-server does for a cluster block's tls.
			tc.ClientAuth, tc.RootCAs = tls.RequireAndVerifyClientCert, tc.ClientCAs
			cfg.server.Cluster.TLSConfig, cfg.server.Cluster.TLSTimeout = tc, 2
		}
		cfg.nats = []nats.Option{nats.Name("crewlet-" + c.Node), nats.Token(token)}
	} else {
		cfg.urls = c.URLs
		cfg.nats = []nats.Option{nats.Name("crewlet-" + c.Node),
			// An operator's NATS restarts and fails over: keep reconnecting,
			// and keep what is published meanwhile out of a buffer that
			// would send it late (an append must succeed or fail now).
			nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.ReconnectBufSize(-1)}
		if c.Creds != "" {
			cfg.nats = append(cfg.nats, nats.UserCredentials(c.Creds))
		}
	}
	l, err := openJetStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (is the fleet up? %d of its nodes must be for %d replicas)", err, c.EffectiveReplicas()/2+1, c.EffectiveReplicas())
	}
	return l, nil
}

// Replicas is how many copies of the log the fleet keeps; 1 on one node.
func (l *JetStreamLog) Replicas() int { return l.replicas }

// subjectToken makes a seat handle one token of a subject (and a valid
// key of a bucket): handles that are already safe are kept as they are,
// readable in the log; anything else is hex behind a '=' no handle starts
// with.
func subjectToken(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "=" + hex.EncodeToString([]byte(s))
}

// claimSubject is where a seat's claims are kept in the log.
func claimSubject(seat string) string { return claimPrefix + subjectToken(seat) }

// ensureClaims makes the log keep seats' claims, for leases opened on a log
// that was not opened as a fleet's (one node's, in tests).
func (l *JetStreamLog) ensureClaims(ctx context.Context) error {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(info.Config.Subjects, claimPrefix+"*") {
		return nil
	}
	cfg := info.Config
	cfg.Subjects = append(slices.Clone(cfg.Subjects), claimPrefix+"*")
	_, err = l.js.UpdateStream(ctx, cfg)
	return err
}

// lastClaim is the position of seat's newest claim in the log; 0 if none.
func (l *JetStreamLog) lastClaim(ctx context.Context, seat string) (uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, claimSubject(seat))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// hostOnly strips a URL to what may be logged: no userinfo, no query.
func hostOnly(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return pu.Scheme + "://" + pu.Host
}

// Describe says where the node's NATS is, for its log: never a password.
func (c Cluster) Describe() string {
	if c.Embedded() {
		return fmt.Sprintf("embedded server %s routing on %s to %s", c.Node, c.Listen, strings.Join(c.Peers, ","))
	}
	hosts := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		hosts[i] = hostOnly(u)
	}
	return "NATS at " + strings.Join(hosts, ",")
}
