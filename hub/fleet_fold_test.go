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

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
)

// FLT-4: an apply that lands while a seat is being claimed is folded into
// the claim. Alice's child of the first revision is still in its first
// start when a revision that changes her child (its environment, and its
// tools' prefix) lands; the seat's mailbox is then opened with the new
// revision's child and tools — the follower is first told alice with
// v2_echo in her registry, never with the first revision's echo.
func TestFleetFoldsAnApplyIntoAClaim(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	revision := func(env, prefix string) *config.Company {
		c, err := config.Parse(fmt.Appendf(nil, `units:
  - id: core
    name: Core
    mcp_env: {echo: {%s: %q%s}}
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Alice, handle: alice}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, shared: false, command: %q%s}
`, gatedEchoVar, gate, env, exe, prefix))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, second := revision("", ""), revision(", REVISION: two", ", tool_prefix: v2_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// What the holder's follower saw of alice's registry each time it was
	// told her.
	type told struct {
		mu    sync.Mutex
		seats []string
		saw   []string
	}
	tells := map[string]*told{}
	nodes := openFleetPair(t, ctx, first, func(n *testNode) {
		tl := &told{}
		tells[n.name] = tl
		n.hub.FollowSeats(func(seats []string) {
			_, old := n.hub.SeatRegistry("alice").Resolve("echo")
			_, folded := n.hub.SeatRegistry("alice").Resolve("v2_echo")
			tl.mu.Lock()
			defer tl.mu.Unlock()
			tl.seats = seats
			if slices.Contains(seats, "alice") {
				tl.saw = append(tl.saw, fmt.Sprintf("echo=%v v2_echo=%v", old, folded))
			}
		})
	})
	var holder *testNode
	eventually(t, 10*time.Second, "alice placed", func() (bool, string) {
		h := nodes[0].leases.Holders()["alice"]
		for _, n := range nodes {
			if n.name == h {
				holder = n
			}
		}
		return holder != nil, fmt.Sprintf("holders %v", nodes[0].leases.Holders())
	})
	// Her claim is under way: the lease is the holder's and her child of
	// the first revision is in its first start, held at the gate.
	starting := func() upstream.State {
		u := holder.hub.servers
		u.mu.Lock()
		defer u.mu.Unlock()
		if s := u.byName[instanceKey("echo", "alice")]; s != nil && s.inst != nil {
			return s.inst.Status().State
		}
		return ""
	}
	eventually(t, 10*time.Second, "alice's first child starting", func() (bool, string) {
		st := starting()
		return st == upstream.StateStarting, fmt.Sprintf("state %q", st)
	})

	for _, n := range nodes {
		if err := n.hub.Apply(second); err != nil {
			t.Fatal(err)
		}
	}
	tl := tells[holder.name]
	tl.mu.Lock()
	early := slices.Contains(tl.seats, "alice")
	tl.mu.Unlock()
	if early {
		t.Fatalf("the follower was told alice before her child of the new revision started: %v, her child now %q", tl.saw, starting())
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
	if tl.saw[0] != "echo=false v2_echo=true" {
		t.Fatalf("alice's mailbox opened with %v, want the new revision's v2_echo alone", tl.saw)
	}
}
