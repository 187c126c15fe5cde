// Package partition cuts a fleet apart for tests: every route between two
// nodes goes through a proxy of that ordered pair, so a test can close a
// node's routes and refuse new ones (a partition made of real TCP
// connections closing), then let them through again. It imports nothing of
// ours, so the state package's own tests and the e2e suites both use it.
//
// Nodes must advertise a route address nobody answers (Dead): a node that
// learns a peer from gossip would otherwise dial it directly, past the
// proxies; this way the only routes are the configured, proxied ones.
//
// A Mesh owns its proxies' goroutines; Close ends them.
package partition

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy carries the connections made to its address to one target.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// NewProxy listens on a loopback port of its own for target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where to dial the target through the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns[in], p.conns[out] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones (true), or lets new
// ones through again (false).
func (p *Proxy) Cut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut(true)
	p.wg.Wait()
}

// Mesh is a proxy for every ordered pair of a fleet's nodes.
type Mesh struct {
	mu      sync.Mutex
	n       int
	proxies map[[2]int]*Proxy
	dead    string
}

// NewMesh makes the proxies for nodes whose route listeners are at
// targets, in order.
func NewMesh(targets []string) (*Mesh, error) {
	m := &Mesh{n: len(targets), proxies: map[[2]int]*Proxy{}}
	for i := range targets {
		for j, target := range targets {
			if i == j {
				continue
			}
			p, err := NewProxy(target)
			if err != nil {
				m.Close()
				return nil, err
			}
			m.proxies[[2]int{i, j}] = p
		}
	}
	// An address that was free a moment ago and that nobody will answer:
	// a port this mesh took and let go.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		return nil, err
	}
	m.dead = ln.Addr().String()
	ln.Close()
	return m, nil
}

// Peers are the addresses node i dials its peers at.
func (m *Mesh) Peers(i int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for j := range m.n {
		if j != i {
			out = append(out, m.proxies[[2]int{i, j}].Addr())
		}
	}
	return out
}

// Dead is the route address every node must advertise.
func (m *Mesh) Dead() string { return m.dead }

// Isolate cuts every route to and from node i, or mends them.
func (m *Mesh) Isolate(i int, cut bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pair, p := range m.proxies {
		if pair[0] == i || pair[1] == i {
			p.Cut(cut)
		}
	}
}

// Close stops every proxy.
func (m *Mesh) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.proxies {
		p.Close()
	}
}
