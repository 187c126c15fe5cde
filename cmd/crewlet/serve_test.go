package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// The fleet's flags: none of them is a single node; a fleet flag without a
// way of joining, or a fleet without a node name, is refused naming the
// flag; lists are split and trimmed; the routes' secret comes from the
// environment, never a flag.
func TestFleetFlags(t *testing.T) {
	t.Setenv("CREWLET_CLUSTER_SECRET", "route-secret-0123456789")
	base := fleetArgs{leaseTTL: state.DefaultLeaseTTL, heartbeat: state.DefaultHeartbeat}
	with := func(f func(*fleetArgs)) fleetArgs {
		a := base
		a.set = map[string]bool{}
		f(&a)
		return a
	}

	if f, err := fleetFlags(with(func(*fleetArgs) {})); f != nil || err != nil {
		t.Fatalf("no fleet flag: %+v, %v; want the single node", f, err)
	}
	for _, flag := range []string{"node", "cluster-peers", "cluster-advertise", "nats-creds", "replicas", "lease-ttl", "heartbeat"} {
		_, err := fleetFlags(with(func(a *fleetArgs) { a.set[flag] = true }))
		if err == nil || !strings.Contains(err.Error(), "--"+flag+" is for a node of a fleet") {
			t.Errorf("--%s alone: %v", flag, err)
		}
	}
	if _, err := fleetFlags(with(func(a *fleetArgs) { a.listen = "127.0.0.1:6250" })); err == nil || !strings.Contains(err.Error(), "--node names this node") {
		t.Errorf("--cluster-listen without --node: %v", err)
	}

	f, err := fleetFlags(with(func(a *fleetArgs) {
		a.node, a.listen, a.peers = "a", "127.0.0.1:6250", " 127.0.0.1:6251, ,127.0.0.1:6252,"
	}))
	if err != nil {
		t.Fatal(err)
	}
	if f.Cluster.Node != "a" || !slices.Equal(f.Cluster.Peers, []string{"127.0.0.1:6251", "127.0.0.1:6252"}) ||
		f.Cluster.Secret != "route-secret-0123456789" || f.LeaseTTL != state.DefaultLeaseTTL || f.Heartbeat != state.DefaultHeartbeat {
		t.Fatalf("embedded fleet: %+v", f)
	}

	f, err = fleetFlags(with(func(a *fleetArgs) {
		a.node, a.nats, a.creds, a.replicas = "b", "nats://n1:4222,nats://n2:4222", "/etc/nats.creds", 1
		a.leaseTTL, a.heartbeat = 30*time.Second, 5*time.Second
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Cluster.URLs, []string{"nats://n1:4222", "nats://n2:4222"}) || f.Cluster.Creds != "/etc/nats.creds" ||
		f.Cluster.Replicas != 1 || f.LeaseTTL != 30*time.Second || f.Heartbeat != 5*time.Second {
		t.Fatalf("fleet on an operator's NATS: %+v", f)
	}

	// What the fleet's own checks refuse reaches the command line.
	if _, err := fleetFlags(with(func(a *fleetArgs) { a.node, a.nats = "not a name", "nats://n1:4222" })); err == nil || !strings.Contains(err.Error(), `node name "not a name"`) {
		t.Errorf("a node name with spaces: %v", err)
	}
}

// One node alone with --cluster-listen is refused: a fleet needs a peer.
func TestFleetFlagsListenWithoutPeers(t *testing.T) {
	a := fleetArgs{node: "a", listen: "127.0.0.1:6250", leaseTTL: state.DefaultLeaseTTL, heartbeat: state.DefaultHeartbeat, set: map[string]bool{}}
	if _, err := fleetFlags(a); err == nil || !strings.Contains(err.Error(), "needs at least one peer") {
		t.Fatalf("a fleet of one node with --cluster-listen: %v", err)
	}
}

// Issue 26, item 4: an embedded fleet without CREWLET_CLUSTER_SECRET is
// refused at the command line in words naming the fix; the loopback
// opt-out and the route TLS files reach the cluster as given.
func TestFleetFlagsRouteSecurity(t *testing.T) {
	t.Setenv("CREWLET_CLUSTER_SECRET", "")
	a := fleetArgs{node: "a", listen: "127.0.0.1:6250", peers: "127.0.0.1:6251", leaseTTL: state.DefaultLeaseTTL, heartbeat: state.DefaultHeartbeat, set: map[string]bool{}}
	if _, err := fleetFlags(a); err == nil || !strings.Contains(err.Error(), "set CREWLET_CLUSTER_SECRET") || !strings.Contains(err.Error(), "--cluster-insecure-loopback") {
		t.Fatalf("a fleet without a route secret: %v", err)
	}
	a.insecureLoopback = true
	f, err := fleetFlags(a)
	if err != nil || !f.Cluster.InsecureLoopback {
		t.Fatalf("on loopback, opted out: %+v %v", f, err)
	}
	a.insecureLoopback = false
	t.Setenv("CREWLET_CLUSTER_SECRET", "route-secret-0123456789")
	a.tlsCert, a.tlsKey, a.tlsCA = "n.pem", "n-key.pem", "ca.pem"
	if f, err = fleetFlags(a); err != nil || f.Cluster.TLS == nil || *f.Cluster.TLS != (state.RouteTLS{CertFile: "n.pem", KeyFile: "n-key.pem", CAFile: "ca.pem"}) {
		t.Fatalf("route TLS: %+v %v", f, err)
	}
}
