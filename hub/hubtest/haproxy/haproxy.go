// Package haproxy runs a fleet's nodes behind a real HAProxy, as an
// operator would: the configuration the README gives, written for the
// nodes at hand, and HAProxy in the foreground as a child its caller owns
// and stops. The end-to-end suite and crewlet-load's fleet measurements
// use it, so the balancer they test and measure is one configuration.
package haproxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Node is one backend: a crewlet serve node's name and its listen address.
type Node struct{ Name, Addr string }

// NodeHeader names the response header saying which node answered (or, on
// an answer HAProxy made itself, which node it had sent the request to).
const NodeHeader = "X-Crewlet-Node"

// Config is haproxy.cfg for a balancer listening on listen in front of
// nodes: round-robin with no stickiness (any node serves any request, so
// none is tied to a client), a node taken out after two failed health
// checks a second apart, and a request that finds its node gone before it
// was sent tried on another. A 2025 session's event stream (a GET that may
// stay silent for long) and a long tool call stay open as long as the
// node's own idle session timeout (30 minutes) allows.
func Config(listen string, nodes []Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    log stdout format raw local0 info

defaults
    mode http
    log global
    option httplog
    option dontlognull
    # A request whose node refuses the connection (dead, restarting) is
    # sent to another node: it never reached a hub, so nothing ran.
    retries 3
    option redispatch 1
    timeout connect 2s
    timeout queue 5s
    timeout http-request 10s
    timeout http-keep-alive 60s
    # An event stream and a long call are quiet connections, not dead ones.
    timeout client 30m
    timeout server 30m
    timeout tunnel 30m
    # A request whose node died with it (or never answered) cannot be
    # answered by a hub: the balancer says what that means for the call,
    # in words and as a JSON-RPC error, instead of an HTML error page.
    http-error status 502 content-type application/json string "%s"
    http-error status 503 content-type application/json string "%s"
    http-error status 504 content-type application/json string "%s"

frontend crewlet
    bind %s
    default_backend crewlet_nodes

backend crewlet_nodes
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
    # A new connection to a node per request, closed with its answer: no
    # request is sent on a connection kept to a node that has died since
    # (it could not be tried elsewhere), and a client's connection to the
    # balancer is tied to no node, so a node's death closes none of them.
    option http-server-close
    http-after-response set-header %s %%s
    default-server inter 1s fall 2 rise 2
`, cfgQuote(DiedWithTheCall), cfgQuote(NoNodeUp), cfgQuote(DiedWithTheCall), listen, NodeHeader)
	for _, n := range nodes {
		fmt.Fprintf(&b, "    server %s %s check\n", n.Name, n.Addr)
	}
	return b.String()
}

// DiedWithTheCall is what the balancer answers for a request whose node
// died with it or did not answer in time (502, 504): a JSON-RPC error of
// class unavailable whose words say the call may have taken effect, since
// the node may have done it before it died.
const DiedWithTheCall = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"unavailable: the hub node serving this request stopped before it answered, so the call may have taken effect. Make the same call again (with the same Idempotency-Key, if it had one): another node answers it, and a call that landed is not made twice."}}`

// NoNodeUp is what the balancer answers when no node is up (503): nothing
// reached a hub, so nothing ran.
const NoNodeUp = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"unavailable: no hub node is up behind the balancer; nothing was sent to a hub. Make the call again once a node is back."}}`

// cfgQuote writes s inside a double-quoted HAProxy argument.
func cfgQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// Binary is Debian's haproxy: on PATH, or where the package puts it
// (/usr/sbin is not on every user's PATH).
func Binary() (string, error) {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/haproxy"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("haproxy is not installed: install Debian's haproxy package (apt-get install haproxy; scripts/test.sh does where it is missing)")
}

// Balancer is a running HAProxy.
type Balancer struct {
	// Addr is where clients reach the nodes, host:port.
	Addr string
	// Log is HAProxy's output: one line per request, which node took it
	// and how it ended, and each health check's verdict.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start writes the configuration for nodes into dir and runs HAProxy in
// the foreground (-db) on it, in a process group of its own, until Stop.
// It answers once the balancer accepts connections on listen.
func Start(dir, listen string, nodes []Node) (*Balancer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(Config(listen, nodes)), 0o600); err != nil {
		return nil, err
	}
	b := &Balancer{Addr: listen, Log: filepath.Join(dir, "haproxy.log"), done: make(chan struct{})}
	logf, err := os.Create(b.Log)
	if err != nil {
		return nil, err
	}
	b.cmd = exec.Command(bin, "-f", cfg, "-db")
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		_ = b.cmd.Wait()
		logf.Close()
		close(b.done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			return b, nil
		}
		select {
		case <-b.done:
			out, _ := os.ReadFile(b.Log)
			return nil, fmt.Errorf("haproxy exited at start: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			_ = b.Stop()
			return nil, fmt.Errorf("haproxy does not accept connections on %s within 10s", listen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is HAProxy's process id, for reading the CPU it spends.
func (b *Balancer) PID() int { return b.cmd.Process.Pid }

// Stop ends HAProxy (SIGTERM: it closes its connections at once) and waits
// for it; its group is killed if it lingers. Safe twice.
func (b *Balancer) Stop() error {
	select {
	case <-b.done:
		return nil // stopped, its pid perhaps another's by now
	default:
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.done
	return errors.New("haproxy did not stop within 5s of SIGTERM; killed")
}
