package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/servers/state"
)

// FleetOptions make the node one of a fleet sharing one company (see
// README, "A fleet"). Nil Options.Fleet runs the embedded single node.
type FleetOptions struct {
	// Cluster is how the node joins: its embedded server routed to its
	// peers', or an operator's NATS.
	Cluster state.Cluster
	// LeaseTTL is how long a seat's lease lives without a renewal;
	// state.DefaultLeaseTTL if zero.
	LeaseTTL time.Duration
	// Heartbeat is how often the node renews its leases, publishes its
	// heartbeat and places seats; state.DefaultHeartbeat if zero.
	Heartbeat time.Duration
}

// Validate reports every problem at once.
func (f *FleetOptions) Validate() error {
	lo := f.leaseOptions(nil)
	return errors.Join(f.Cluster.Validate(), lo.Validate())
}

func (f *FleetOptions) leaseOptions(log *slog.Logger) state.LeaseOptions {
	lo := state.LeaseOptions{Node: f.Cluster.Node, TTL: f.LeaseTTL, Renew: f.Heartbeat, Logger: log}
	lo.EnsureDefaults()
	return lo
}

// fleetConn is a node's way into its fleet: the shared log's connection and
// its leases. close lets the seats go and closes the connection, unless the
// node's state took the log over (it closes it then).
type fleetConn struct {
	opts   *FleetOptions
	js     *state.JetStreamLog
	leases *state.Leases
	// keys are the fleet's shared keys, sealed in its keys bucket under
	// the route secret.
	keys *state.FleetKeys
	// logOwned is set once a state node took the log over.
	logOwned bool
}

// joinFleet joins the fleet and opens this node's leases.
func joinFleet(ctx context.Context, dataDir string, f *FleetOptions, log *slog.Logger) (*fleetConn, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	lo := f.leaseOptions(log.With("component", "leases"))
	log.Info("fleet_joining", "node", f.Cluster.Node, "nats", f.Cluster.Describe(), "replicas", f.Cluster.EffectiveReplicas(),
		"lease_ttl_seconds", lo.TTL.Seconds(), "heartbeat_seconds", lo.Renew.Seconds())
	if f.Cluster.EffectiveReplicas() < 3 {
		log.Warn("fleet_under_replicated", "replicas", f.Cluster.EffectiveReplicas(),
			"reason", "fewer than three copies: the fleet stops taking writes when any node holding one is down")
	}
	if lo.TTL-lo.Margin < 10*time.Second+lo.Renew {
		log.Warn("fleet_short_lease", "lease_ttl_seconds", lo.TTL.Seconds(),
			"reason", "a JetStream leader election takes up to 9 s; a lease proved for less than that plus a heartbeat can lapse on every node while its bucket elects a leader")
	}
	start := time.Now()
	js, err := state.OpenCluster(ctx, filepath.Join(dataDir, "state", "log"), f.Cluster)
	if err != nil {
		return nil, fmt.Errorf("joining the fleet: %w", err)
	}
	leases, err := state.OpenLeases(ctx, js, lo)
	if err != nil {
		_ = js.Close()
		return nil, fmt.Errorf("opening the fleet's seat leases: %w", err)
	}
	keys, err := js.OpenFleetKeys(ctx, f.Cluster.Secret)
	if err != nil {
		_ = leases.Close()
		_ = js.Close()
		return nil, fmt.Errorf("opening the fleet's keys: %w", err)
	}
	log.Info("fleet_joined", "node", f.Cluster.Node, "replicas", js.Replicas(), "took_ms", time.Since(start).Milliseconds())
	return &fleetConn{opts: f, js: js, leases: leases, keys: keys}, nil
}

// hubFleet is what the hub is given.
func (c *fleetConn) hubFleet() *hub.Fleet {
	return &hub.Fleet{Node: c.opts.Cluster.Node, Leases: c.leases, Bus: c.js, Heartbeat: c.leases.Options().Renew, Health: c.js.Health,
		Keys: c.keys, Buckets: c.js}
}

// close lets every seat still held go, so peers take them at once, then
// closes the connection if nothing else owns it.
func (c *fleetConn) close() {
	if c == nil {
		return
	}
	_ = c.leases.Close()
	if !c.logOwned {
		_ = c.js.Close()
	}
}
