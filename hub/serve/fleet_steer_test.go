package serve

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest/ports"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startFleetTurnNodes runs a fleet of n nodes in process, each as `crewlet
// serve --cluster-listen` runs one: embedded JetStream servers routed to
// each other under a secret, leases, heartbeats and the runtime following
// the seats its node holds.
func startFleetTurnNodes(t *testing.T, model *modeltest.Server, doc string, env map[string]string, n int) []*turnNode {
	t.Helper()
	// A node binds its route port only once it starts, and its peers
	// must be told it first.
	routes := make([]string, n)
	for i := range routes {
		routes[i] = ports.Addr(t)
	}
	nodes := make([]*turnNode, n)
	outs := make([]*syncBuffer, n)
	dones := make([]chan error, n)
	for i := range nodes {
		node := &turnNode{t: t, dir: t.TempDir(), logs: newLogWatch()}
		nodes[i] = node
		cfg := filepath.Join(node.dir, "company.yaml")
		if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(doc, "{{MODEL}}", model.URL())), 0o600); err != nil {
			t.Fatal(err)
		}
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		var got sync.Mutex
		outs[i], dones[i] = &syncBuffer{}, make(chan error, 1)
		o := Options{ConfigFile: cfg, DataDir: filepath.Join(node.dir, "data"), Logger: slog.New(node.logs),
			Listen: "127.0.0.1:0", Stdout: outs[i],
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Fleet: &FleetOptions{Cluster: state.Cluster{Node: fmt.Sprintf("n%d", i), Listen: routes[i], Peers: peers,
				Secret: "steer-fleet-route-secret", Ready: time.Minute}, Heartbeat: time.Second, LeaseTTL: 5 * time.Second},
			onRuntime: func(rt *agent.Runtime) { got.Lock(); node.rt = rt; got.Unlock() }}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { dones[i] <- Run(ctx, o) }()
		node.stop = func() error {
			cancel()
			select {
			case err := <-dones[i]:
				return err
			case <-time.After(30 * time.Second):
				return fmt.Errorf("node %d did not stop within 30s", i)
			}
		}
		t.Cleanup(func() {
			if err := node.stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	// A fleet starts only once a majority is up: every node is started
	// above, and each is waited for here.
	deadline := time.Now().Add(2 * time.Minute)
	for i, node := range nodes {
		for !strings.Contains(outs[i].String(), "MCP endpoint:") {
			select {
			case err := <-dones[i]:
				t.Fatalf("node %d returned before listening: %v", i, err)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: no banner within 2 minutes", i)
			}
		}
		addr, err := os.ReadFile(filepath.Join(node.dir, "data", "listen-addr"))
		if err != nil {
			t.Fatal(err)
		}
		node.base = "http://" + strings.TrimSpace(string(addr))
	}
	return nodes
}

// holderOf waits until exactly one node runs the seat's mailbox, and
// answers it.
func holderOf(t *testing.T, nodes []*turnNode, seat string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		holder, holders := -1, 0
		for i, n := range nodes {
			if n.rt != nil && n.rt.Holds(seat) {
				holder, holders = i, holders+1
			}
		}
		if holders == 1 {
			return holder
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes run %s after a minute", holders, seat)
		}
		time.Sleep(50 * time.Millisecond) // between looks at the runtimes' mailboxes
	}
}

// refusedWith is refused, answering the sentence too.
func refusedWith(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) (authority.Class, string) {
	t.Helper()
	class := refused(t, cs, tool, args)
	res, _ := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	return class, hubtest.Text(res)
}

// Issue 27, item 3 (OPS-3 on a fleet, FLT-1): steer_turn through a node
// that does not hold the seat is asked of the node that does: a seat
// running no turn is not_running in its holder's words, and a note to the
// turn in flight there reaches its model at the next round, as the
// sender's words.
func TestSteerATurnOnAnotherNode(t *testing.T) {
	asked, release := make(chan struct{}, 1), make(chan struct{})
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			asked <- struct{}{}
			<-release
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "on it"})
		}
		return finished
	})
	nodes := startFleetTurnNodes(t, model, decisionsCompany, decisionsEnv, 3)
	holder := holderOf(t, nodes, "assistant")
	other := nodes[(holder+1)%len(nodes)]
	ada := other.client(decisionsEnv["ADA_TOKEN"])
	note := map[string]any{"seat": "assistant", "note": "Check the deploy log before answering."}

	if class, sentence := refusedWith(t, ada, "steer_turn", note); class != authority.NotRunning || !strings.Contains(sentence, "running no turn now") {
		t.Fatalf("steering the idle seat through another node: %s %s", class, sentence)
	}

	key := call(t, ada, "create_work_item", map[string]any{"title": "Deploy failed"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant why did the deploy fail?"})
	<-asked
	out := call(t, ada, "steer_turn", note)
	close(release)
	end := nodes[holder].turnEnded("assistant", key)
	if out["note"] != "queued" || out["turn"] != end["turn"] || end["outcome"] != "delivered" {
		t.Fatalf("steered %v, ended %v", out, end)
	}
	read := model.Requests()[1].UserText()
	if !strings.Contains(read, "Check the deploy log before answering.") || !strings.Contains(read, "by=@ada (human)") {
		t.Fatalf("the turn read %s", read)
	}
}
