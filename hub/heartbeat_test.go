package hub

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// MCP-12: a reason a heartbeat carries is bounded, cut on a character and
// saying how much is left out; a short one passes whole.
func TestBeatReasonsAreBounded(t *testing.T) {
	if got := bound("short", 10); got != "short" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("é", 2000) // 4000 bytes
	got := bound(long, beatReasonBytes)
	if !utf8.ValidString(got) || !strings.Contains(got, "more bytes in the node's log") || len(got) > beatReasonBytes+64 {
		t.Fatalf("%d bytes: %q", len(got), got[len(got)-60:])
	}
}

// MCP-12: a heartbeat carries at most beatReasons distinct reasons of a
// cell, each bounded, and counts the ones it leaves out; fewer pass whole.
func TestBeatCellReasonsAreBounded(t *testing.T) {
	var many []cellReason
	for i := range beatReasons + 3 {
		many = append(many, cellReason{State: rowFailing, Reason: fmt.Sprintf("seat s%d: %s", i, strings.Repeat("x", 3000)), Seats: []string{fmt.Sprint("s", i)}})
	}
	got := beatCell(nodeCell{Node: "n1", State: rowFailing, Reason: many[0].Reason, Reasons: many})
	if len(got.Reasons) != beatReasons || got.ReasonsOmitted != 3 || len(got.Reason) > beatReasonBytes+64 {
		t.Fatalf("%d reasons carried, %d counted as left out, reason of %d bytes", len(got.Reasons), got.ReasonsOmitted, len(got.Reason))
	}
	for _, r := range got.Reasons {
		if len(r.Reason) > beatReasonBytes+64 || !strings.Contains(r.Reason, "more bytes in the node's log") {
			t.Fatalf("a reason of %d bytes: %.80q", len(r.Reason), r.Reason)
		}
	}
	if len(many[0].Reason) != len("seat s0: ")+3000 {
		t.Fatal("the status table's own reason was cut")
	}
	few := beatCell(nodeCell{Reasons: many[:2]})
	if len(few.Reasons) != 2 || few.ReasonsOmitted != 0 {
		t.Fatalf("two reasons: %+v", few)
	}
}

// FLT-2, MCP-12: another node's cell comes from its last heartbeat while
// it is live; a node silent for three of its heartbeats reads Not
// reported, saying since when; a live node that does not report a server
// (another revision) reads Not reported too; this node's own beats and
// beats that do not decode are not taken in; a node silent long enough is
// forgotten.
func TestPeerCells(t *testing.T) {
	p := newPeerTable("a")
	now := time.Now()
	beat := func(node string, interval time.Duration, servers ...beatServer) []byte {
		b, _ := json.Marshal(heartbeat{Node: node, IntervalMs: interval.Milliseconds(), Seats: []string{}, Servers: servers})
		return b
	}
	running := beatServer{Name: "echo", nodeCell: nodeCell{State: rowRunning, Instances: 1, Tools: 3}}
	p.record(beat("a", time.Second, running), now) // its own: ignored
	p.record([]byte("not json"), now)
	p.record(beat("b", time.Second, running), now)
	p.record(beat("c", time.Second), now.Add(-4*time.Second))
	cells := map[string]nodeCell{}
	for _, c := range p.cells("echo", now) {
		cells[c.Node] = c
	}
	if len(cells) != 2 {
		t.Fatalf("cells %+v", cells)
	}
	if c := cells["b"]; c.State != rowRunning || c.Tools != 3 {
		t.Fatalf("b: %+v", c)
	}
	if c := cells["c"]; c.State != rowNotReported || !strings.Contains(c.Reason, "no heartbeat from this node for 4s") || c.LastHeard == "" {
		t.Fatalf("c: %+v", c)
	}
	if got := p.liveNodes(now); strings.Join(got, ",") != "a,b" {
		t.Fatalf("live %v", got)
	}
	p.record(beat("c", time.Second), now)
	for _, c := range p.cells("echo", now) {
		if c.Node == "c" && (c.State != rowNotReported || !strings.Contains(c.Reason, "another revision")) {
			t.Fatalf("a live node not reporting the server: %+v", c)
		}
	}
	p.forget(now.Add(6 * time.Minute))
	if got := p.liveNodes(now.Add(6 * time.Minute)); strings.Join(got, ",") != "a" || len(p.nodes(now)) != 0 {
		t.Fatalf("after forgetting: %v", got)
	}
}

// MCP-12 across nodes: a node running no instance of a server (one holding
// none of a per-role server's seats) has no say in its row; failing on one
// node and running on another is Partly failing; a silent node alone is
// Not reported.
func TestRollUpAcrossNodes(t *testing.T) {
	idle := nodeCell{Node: "c", State: rowNotStarted, Reason: "this node acts for none of the seats"}
	for _, tc := range []struct {
		cells []nodeCell
		state string
	}{
		{[]nodeCell{{Node: "a", State: rowRunning, Instances: 1}, idle}, rowRunning},
		{[]nodeCell{{Node: "a", State: rowRunning, Instances: 1}, {Node: "b", State: rowFailing, Reason: "x", Instances: 1}, idle}, rowPartly},
		{[]nodeCell{{Node: "a", State: rowFailing, Reason: "x", Instances: 1}, {Node: "b", State: rowNotReported}}, rowFailing},
		{[]nodeCell{idle, {Node: "d", State: rowNotStarted}}, rowNotStarted},
		{[]nodeCell{{Node: "b", State: rowNotReported}}, rowNotReported},
	} {
		if got, _ := rollUp(tc.cells); got != tc.state {
			t.Errorf("%+v: %s, want %s", tc.cells, got, tc.state)
		}
	}
	if preferred("alice", []string{"a", "b", "c"}) != preferred("alice", []string{"c", "a", "b"}) {
		t.Fatal("the preferred node depends on the order nodes are listed in")
	}
}
