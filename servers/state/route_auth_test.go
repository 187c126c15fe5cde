package state

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// testRouteSecret is the route secret of the test fleets.
const testRouteSecret = "test-fleet-route-secret-0123456789"

// rogue is a NATS server that is not of the fleet, routed to one of its
// nodes as an attacker who reaches a route port would route one: with no
// secret, a wrong one, or (the control) the fleet's own.
type rogue struct {
	srv *server.Server
	mu  sync.Mutex
	log []string
}

func (r *rogue) logf(format string, v ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, v...))
}
func (r *rogue) Noticef(format string, v ...any) { r.logf(format, v...) }
func (r *rogue) Warnf(format string, v ...any)   { r.logf(format, v...) }
func (r *rogue) Fatalf(format string, v ...any)  { r.logf(format, v...) }
func (r *rogue) Errorf(format string, v ...any)  { r.logf(format, v...) }
func (r *rogue) Debugf(format string, v ...any)  { r.logf(format, v...) }
func (r *rogue) Tracef(format string, v ...any)  { r.logf(format, v...) }

// said counts the rogue's log lines that hold s.
func (r *rogue) said(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.log {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// routesRogue reports whether a fleet node holds a route from the rogue.
// A node registers a route it accepted only once the route's credentials
// (and certificate) passed, so a refused rogue is never among them, at
// any moment: unlike the rogue's own count, which holds a route from the
// fleet's first word until the fleet hangs up.
func routesRogue(t *testing.T, n *fleetNode) bool {
	t.Helper()
	rz, err := n.log.ns.Routez(&server.RoutezOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rz.Routes {
		if r.RemoteName == "rogue" {
			return true
		}
	}
	return false
}

func startRogue(t *testing.T, route string, user *url.Userinfo) *rogue {
	t.Helper()
	r := &rogue{}
	srv, err := server.NewServer(&server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
		Cluster: server.ClusterOpts{Name: fleetName, Host: "127.0.0.1", Port: server.RANDOM_PORT},
		Routes:  []*url.URL{{Scheme: "nats", Host: route, User: user}}, Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	srv.SetLogger(r, true, false)
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the rogue server did not start")
	}
	return r
}

// await polls what the rogue can be asked, until cond holds.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server routed to a node of the fleet with no secret or a wrong one
// is refused the route, so it holds no route and nothing of the log can
// reach it; the same server given the fleet's secret is routed, and a
// subscriber on it reads the log as it is written, which is what the
// secret keeps out (issue 26, item 4).
func testRoutesAdmitOnlyTheFleet(t *testing.T, nodes []*fleetNode) {
	for _, c := range []struct {
		name     string
		user     *url.Userinfo
		admitted bool
	}{
		{"no secret", nil, false},
		{"a wrong secret", url.UserPassword(fleetName, "not-the-fleet-route-secret"), false},
		{"the fleet's secret", url.UserPassword(fleetName, testRouteSecret), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startRogue(t, nodes[0].route, c.user)
			if !c.admitted {
				// Two refusals: the node has seen the route's
				// credentials, and refused them, at least once.
				await(t, "the route refused", func() bool { return r.said("Authorization Violation") >= 2 })
				if routesRogue(t, nodes[0]) {
					t.Fatalf("a route with %s is held", c.name)
				}
				return
			}
			await(t, "the route admitted", func() bool { return routesRogue(t, nodes[0]) })
			nc, err := nats.Connect(r.srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync(streamSubject)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			// The subscription's interest reaches the fleet over the
			// route; until it has, a write is not sent this way.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := 0; ; i++ {
				op := noteOp("note", notePayload{Key: fmt.Sprintf("rogue-%d", i), Value: "secret work"})
				op.Caller.Kind = "human"
				if _, err := nodes[0].node.Write(ctx, op); err != nil {
					t.Fatal(err)
				}
				if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
					if !strings.Contains(string(m.Data), "secret work") {
						t.Fatalf("the admitted rogue read %q", m.Data)
					}
					return
				}
				if ctx.Err() != nil {
					t.Fatal("an admitted route never carried the log")
				}
			}
		})
	}
}

// Issue 26, item 4: an embedded fleet is refused without a route secret,
// in words naming the fix, unless every route address is on this machine
// and it says so; a short secret, half a TLS setup, or route security on
// an operator's NATS are refused too.
func TestClusterRouteAuthRules(t *testing.T) {
	base := Cluster{Node: "a", Listen: "127.0.0.1:6250", Peers: []string{"127.0.0.1:6251"}}
	for _, c := range []struct {
		name string
		edit func(*Cluster)
		want string // "" for no problem
	}{
		{"a secret", func(c *Cluster) { c.Secret = testRouteSecret }, ""},
		{"no secret", func(*Cluster) {}, "set CREWLET_CLUSTER_SECRET"},
		{"a short secret", func(c *Cluster) { c.Secret = "short" }, "the cluster secret is 5 characters"},
		{"loopback opt-out", func(c *Cluster) { c.InsecureLoopback = true }, ""},
		{"loopback opt-out, IPv6", func(c *Cluster) {
			c.InsecureLoopback, c.Listen, c.Peers = true, "[::1]:6250", []string{"[::1]:6251"}
		}, ""},
		{"loopback opt-out with a peer elsewhere", func(c *Cluster) {
			c.InsecureLoopback, c.Peers = true, []string{"10.0.0.2:6251"}
		}, `"10.0.0.2:6251" is not a loopback address`},
		{"loopback opt-out advertising elsewhere", func(c *Cluster) {
			c.InsecureLoopback, c.Advertise = true, "203.0.113.5:6250"
		}, `"203.0.113.5:6250" is not a loopback address`},
		{"loopback opt-out naming a host", func(c *Cluster) {
			c.InsecureLoopback, c.Peers = true, []string{"localhost:6251"}
		}, `"localhost:6251" is not a loopback address`},
		{"both", func(c *Cluster) { c.Secret, c.InsecureLoopback = testRouteSecret, true }, "contradict"},
		{"TLS whole", func(c *Cluster) {
			c.Secret, c.TLS = testRouteSecret, &RouteTLS{CertFile: "n.pem", KeyFile: "n-key.pem", CAFile: "ca.pem"}
		}, ""},
		{"TLS without its CA", func(c *Cluster) {
			c.Secret, c.TLS = testRouteSecret, &RouteTLS{CertFile: "n.pem", KeyFile: "n-key.pem"}
		}, "needs all three"},
		{"an operator's NATS needs no secret", func(c *Cluster) {
			c.Listen, c.Peers, c.URLs = "", nil, []string{"nats://n1:4222"}
		}, ""},
		{"route security on an operator's NATS", func(c *Cluster) {
			c.Listen, c.Peers, c.URLs, c.InsecureLoopback = "", nil, []string{"nats://n1:4222"}, true
		}, "keeps its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := base
			cl.Peers = append([]string(nil), base.Peers...)
			c.edit(&cl)
			err := cl.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
		})
	}
}

// writeRouteTLS writes a CA and, for each name, a route certificate it
// signs (valid for 127.0.0.1, as both server and client: a route is
// dialled by one node and accepted by the other), and answers the files.
func writeRouteTLS(t *testing.T, dir string, names ...string) (ca string, nodes map[string]*RouteTLS) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test fleet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name string, block *pem.Block) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca = write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	nodes = map[string]*RouteTLS{}
	for i, n := range names {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		nodes[n] = &RouteTLS{CertFile: write(n+".pem", &pem.Block{Type: "CERTIFICATE", Bytes: der}),
			KeyFile: write(n+"-key.pem", &pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), CAFile: ca}
	}
	return ca, nodes
}

// Issue 26, item 4: a fleet whose routes speak TLS forms and shares its
// log, each node's certificate checked against the fleet's CA; a server
// that routes to it in the clear, with the fleet's secret even, is
// refused.
func TestFleetRoutesOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: forms a fleet of two nodes; it runs in every full test run")
	}
	_, certs := writeRouteTLS(t, t.TempDir(), "n0", "n1")
	nodes := startFleetWith(t, 2, func(i int, c *Cluster) { c.TLS = certs[fmt.Sprintf("n%d", i)] })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := noteOp("note", notePayload{Key: "over-tls", Value: "n0"})
	op.Caller.Kind = "human"
	a, err := nodes[0].node.Write(ctx, op)
	if err != nil || a.Outcome != Applied {
		t.Fatalf("write: %+v %v", a, err)
	}
	if err := nodes[1].node.WaitFor(ctx, a.Position); err != nil {
		t.Fatal(err)
	}
	if v, _, found := readNote(t, nodes[1].node, "over-tls"); !found || v != "n0" {
		t.Fatalf("n1 reads %q (found %v)", v, found)
	}
	r := startRogue(t, nodes[0].route, url.UserPassword(fleetName, testRouteSecret))
	await(t, "the clear route refused", func() bool { return r.said("Router connection closed") >= 2 })
	if routesRogue(t, nodes[0]) {
		t.Fatal("a route in the clear is held by a fleet that speaks TLS")
	}
	t.Logf("%q", r.log)
}
