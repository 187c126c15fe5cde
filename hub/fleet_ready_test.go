package hub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
)

// gatedEchoVar makes the test binary a stdio echo server that starts
// serving only once the file the variable names exists: a per-role child
// whose first start takes as long as the test says.
const gatedEchoVar = "CREWLET_HUB_GATED_ECHO"

func init() {
	gate := os.Getenv(gatedEchoVar)
	if gate == "" {
		return
	}
	for {
		if _, err := os.Stat(gate); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := benchEchoServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "gated echo:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Issue 27, item 2 (FLT-4): in a fleet, a seat placed on a node is told to
// the node's follower (the runtime, which opens the seat's mailbox) only
// once its per-role child has started, so the seat's first turn has the
// child's tools: while the child is still starting, the node holds the
// seat and says so in its heartbeats, but its follower is not told it.
func TestFleetTellsASeatOnlyOnceItsChildrenStarted(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	c, err := config.Parse(fmt.Appendf(nil, `units:
  - id: core
    name: Core
    mcp_env: {echo: {%s: %q}}
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, shared: false, command: %q}
`, gatedEchoVar, gate, exe))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type told struct {
		mu sync.Mutex
		// seats as last told, and whether alice's tool was in her
		// registry each time she was named.
		seats     []string
		withTools []bool
	}
	tells := map[string]*told{}
	nodes := openFleetPair(t, ctx, c, func(n *testNode) {
		tl := &told{}
		tells[n.name] = tl
		n.hub.FollowSeats(func(seats []string) {
			_, listed := n.hub.SeatRegistry("alice").Resolve("echo")
			tl.mu.Lock()
			defer tl.mu.Unlock()
			tl.seats = seats
			if slices.Contains(seats, "alice") {
				tl.withTools = append(tl.withTools, listed)
			}
		})
	})
	holder, other := placedOn(t, nodes, "alice")
	// The holder's heartbeat naming alice is sent by its loop after the
	// pass that claimed her, which told its follower what it would.
	eventually(t, 10*time.Second, "the holder's heartbeat names alice", func() (bool, string) {
		for _, nv := range other.hub.fleetView(ctx).Nodes {
			if nv.Node == holder.name && slices.Contains(nv.Seats, "alice") {
				return true, ""
			}
		}
		return false, "not yet"
	})
	tl := tells[holder.name]
	tl.mu.Lock()
	early := slices.Contains(tl.seats, "alice")
	tl.mu.Unlock()
	if early {
		t.Fatal("the follower was told alice while her child was still starting")
	}
	u := holder.hub.servers
	u.mu.Lock()
	st := u.byName[instanceKey("echo", "alice")].inst.Status().State
	u.mu.Unlock()
	if st != upstream.StateStarting {
		t.Fatalf("alice's child is %s before its gate opened", st)
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the follower told alice", func() (bool, string) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return slices.Contains(tl.seats, "alice"), fmt.Sprintf("told %v", tl.seats)
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if slices.Contains(tl.withTools, false) {
		t.Fatalf("alice was named before her child's tool was in her registry: %v", tl.withTools)
	}
}
