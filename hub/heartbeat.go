package hub

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// Heartbeats (FLT-2, MCP-12). Every node of a fleet publishes, each
// heartbeat, its MCP servers as they are now — per server its own cell,
// its instances counted — and the seats it acts for, on core pub/sub:
// nothing is kept, and a node that stops beating simply goes quiet. Each
// node keeps the last beat of every other; GET /mcp-servers shows a cell
// per node from them, and a node not heard from for three of its own
// heartbeats as Not reported.

// beatSubject is where heartbeats go: beatSubject + node.
const beatSubject = "crewlet.fleet.heartbeat."

// beatReasonBytes bounds each reason a heartbeat carries; the whole text is
// in the node's own log (mcp_server_failed, server_exited).
const beatReasonBytes = 2048

// beatReasons bounds how many distinct reasons a heartbeat carries for one
// server: a per-seat server's seats each give a sentence of their own
// (their own variable), and a beat is sent every few seconds. The rest are
// counted, and are in the node's own log.
const beatReasons = 8

// silentBeats is how many of its heartbeats a node may miss before it is
// no longer live: not reported, not a choice for a free seat.
const silentBeats = 3

// forgetAfter is how long a silent node is still shown as Not reported
// before it is forgotten (a node taken out of the fleet for good).
func forgetAfter(interval time.Duration) time.Duration {
	return max(5*time.Minute, 20*interval)
}

// heartbeat is one node's beat.
type heartbeat struct {
	Node       string       `json:"node"`
	IntervalMs int64        `json:"interval_ms"`
	Seats      []string     `json:"seats"`
	Servers    []beatServer `json:"servers"`
}

// beatServer is one server's cell as its node reports it.
type beatServer struct {
	Name string `json:"name"`
	nodeCell
}

// bound cuts a reason to n bytes on a character boundary, saying so.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" [… %d more bytes in the node's log]", len(s)-cut)
}

// beatCell is a cell as a heartbeat carries it: each reason bounded, and
// at most beatReasons of them, the rest counted in ReasonsOmitted.
func beatCell(c nodeCell) nodeCell {
	c.Reason = bound(c.Reason, beatReasonBytes)
	if len(c.Reasons) > beatReasons {
		c.ReasonsOmitted += len(c.Reasons) - beatReasons
		c.Reasons = c.Reasons[:beatReasons]
	}
	c.Reasons = slices.Clone(c.Reasons)
	for i := range c.Reasons {
		c.Reasons[i].Reason = bound(c.Reasons[i].Reason, beatReasonBytes)
	}
	return c
}

// peer is the last beat heard from another node, and when (this node's
// clock, monotonic).
type peer struct {
	heard    time.Time
	interval time.Duration
	beat     heartbeat
}

// peerTable is what this node has heard from the others. Its lock is a
// leaf.
type peerTable struct {
	self string
	mu   sync.Mutex
	// peers are by node; never this node's own beats.
	peers map[string]*peer
}

func newPeerTable(self string) *peerTable {
	return &peerTable{self: self, peers: map[string]*peer{}}
}

// record takes in a beat; a beat that does not decode is dropped (a node
// of another version, or noise on the subject).
func (p *peerTable) record(data []byte, now time.Time) {
	var b heartbeat
	if err := json.Unmarshal(data, &b); err != nil || b.Node == "" || b.Node == p.self || b.IntervalMs <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peers[b.Node] = &peer{heard: now, interval: time.Duration(b.IntervalMs) * time.Millisecond, beat: b}
}

// live reports whether a peer was heard within silentBeats of its own
// heartbeats.
func (pe *peer) live(now time.Time) bool {
	return now.Sub(pe.heard) <= silentBeats*pe.interval
}

// liveNodes lists the nodes heard from lately, this node among them, sorted.
func (p *peerTable) liveNodes(now time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []string{p.self}
	for name, pe := range p.peers {
		if pe.live(now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// forget drops the nodes silent for longer than forgetAfter.
func (p *peerTable) forget(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, pe := range p.peers {
		if now.Sub(pe.heard) > forgetAfter(pe.interval) {
			delete(p.peers, name)
		}
	}
}

// cells is every other node's cell for server: its report when it is live
// (Not reported if it does not report the server: a revision it has not
// applied), and Not reported, saying since when, when it went quiet.
func (p *peerTable) cells(server string, now time.Time) []nodeCell {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []nodeCell
	for name, pe := range p.peers {
		if !pe.live(now) {
			out = append(out, nodeCell{Node: name, State: rowNotReported,
				Reason:    fmt.Sprintf("no heartbeat from this node for %s", now.Sub(pe.heard).Round(time.Second)),
				LastHeard: time.Now().Add(-now.Sub(pe.heard)).UTC().Format(time.RFC3339)})
			continue
		}
		cell := nodeCell{Node: name, State: rowNotReported, Reason: "this node does not report it: it runs another revision of the company"}
		for _, s := range pe.beat.Servers {
			if s.Name == server {
				cell = s.nodeCell
				cell.Node = name
			}
		}
		out = append(out, cell)
	}
	return out
}

// nodes describes every node heard from, for GET /fleet.
func (p *peerTable) nodes(now time.Time) []fleetNodeView {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []fleetNodeView
	for name, pe := range p.peers {
		out = append(out, fleetNodeView{Node: name, Live: pe.live(now), Seats: slices.Clone(pe.beat.Seats),
			LastHeard: time.Now().Add(-now.Sub(pe.heard)).UTC().Format(time.RFC3339Nano)})
	}
	return out
}

// fleetNodeView is one node in GET /fleet.
type fleetNodeView struct {
	Node      string   `json:"node"`
	Live      bool     `json:"live"`
	Self      bool     `json:"self,omitempty"`
	Seats     []string `json:"seats"`
	LastHeard string   `json:"last_heard,omitempty"`
}
