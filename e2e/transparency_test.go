//lint:file-ignore SA1019 the hub forwards roots (deprecated in 2026-07-28, SEP-2577) for clients of the session revisions; the test plays such a client.

package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transparency: through /operator/mcp, with go-sdk's everything-server as the
// hub's only upstream, the protocol's conformance suite passes every scenario
// it passes against that server directly. The suite's client sends no
// credentials, so a loopback proxy adds the bearer header; the hub's own
// authentication is not weakened.
func TestConformanceThroughHubMatchesDirect(t *testing.T) {
	npmInstalled(t)
	bin := buildEverythingServer(t)

	// Direct: the same server over stateful streamable HTTP.
	port := freePort(t)
	startPeerProcess(t, nil, bin, "-http", fmt.Sprintf("127.0.0.1:%d", port), "-stateless=false")
	direct := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitHTTP(t, direct, 20*time.Second)
	want := runConformance(t, direct)

	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
`, bin))
	proxy := authProxy(t, h.baseURL(), e2eToken)
	got := runConformance(t, proxy+"/operator/mcp")

	var missing []string
	for s := range want.Passed {
		if _, ok := got.Passed[s]; !ok {
			missing = append(missing, s+": "+strings.Join(got.Failed[s], "; "))
		}
	}
	sort.Strings(missing)
	if len(want.Passed) < 25 {
		t.Fatalf("the direct baseline passed only %d scenarios; the comparison says little", len(want.Passed))
	}
	for _, m := range missing {
		t.Errorf("passes directly but not through the hub: %s", m)
	}
	if t.Failed() {
		for _, line := range strings.Split(h.logs(), "\n") {
			if !strings.Contains(line, "server_stderr") && (strings.Contains(line, "WARN") || strings.Contains(line, "ERROR")) {
				t.Log(line)
			}
		}
	}
}

// A server's roots/list request during a call reaches the calling client,
// which answers with its own roots.
func TestRootsReachTheCallingClient(t *testing.T) {
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
`, bin))
	client := mcp.NewClient(&mcp.Implementation{Name: "with-roots", Version: "0"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///srv/project-alpha", Name: "alpha"})
	tr := &mcp.StreamableClientTransport{Endpoint: h.mcpURL(), HTTPClient: hubtest.Client(e2eToken)}
	cs, err := client.Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := callTool(t, cs, "test_input_required_result_list_roots", map[string]any{})
	if res.IsError || !strings.Contains(hubtest.Text(res), "project-alpha") {
		t.Fatalf("roots through the hub: %s", hubtest.Text(res))
	}
}

// Clients share one upstream subscription per resource: one client leaving
// does not silence another, and a server that restarts is subscribed again.
func TestSubscriptionsSharedAndRestored(t *testing.T) {
	bin := buildEverythingServer(t)
	h := hubWithServers(t, fmt.Sprintf(`  - name: everything
    command: %q
`, bin))
	type watcher struct {
		cs      *mcp.ClientSession
		updates chan string
	}
	watch := func() watcher {
		w := watcher{updates: make(chan string, 64)}
		client := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "0"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				select {
				case w.updates <- r.Params.URI:
				default:
				}
			},
		})
		tr := &mcp.StreamableClientTransport{Endpoint: h.mcpURL(), HTTPClient: hubtest.Client(e2eToken)}
		cs, err := client.Connect(ctxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if err := cs.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
		w.cs = cs
		return w
	}
	expectUpdate := func(w watcher, why string) {
		t.Helper()
		// Drain what came before, then wait for a fresh update (the server
		// sends one every 3 s).
		for len(w.updates) > 0 {
			<-w.updates
		}
		select {
		case <-w.updates:
		case <-time.After(8 * time.Second):
			t.Fatalf("no resources/updated %s", why)
		}
	}
	a, b := watch(), watch()
	expectUpdate(b, "while subscribed")
	if err := a.cs.Unsubscribe(ctxT(t), &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	expectUpdate(b, "after another client unsubscribed")
	kids := childrenOf(h.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once the new child is up, whatever the old one sent has long been
	// delivered, so the update expected next is the new one's.
	waitLog(t, h, 15*time.Second, "server_restarted", `"server":"everything"`)
	expectUpdate(b, "after the server restarted")
}
