package haproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest/haproxy"
	"github.com/crewlet/hub/servers/state/statetest/ports"
)

// HAProxy itself accepts the configuration.
func TestConfigIsValid(t *testing.T) {
	bin, err := haproxy.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir() + "/haproxy.cfg"
	text := haproxy.Config("127.0.0.1:8420", []haproxy.Node{{"a", "10.0.0.1:8420"}, {"b", "10.0.0.2:8420"}})
	if err := writeFile(cfg, text); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, text)
	}
}

// Round-robin with no stickiness: one client's requests are spread over
// every node, each answer says which node gave it, and once a node is gone
// every request is answered by the others, none lost, before the health
// checks have taken it out (a refused connection is tried on another node).
func TestBalancerSpreadsAndSkipsADeadNode(t *testing.T) {
	var nodes []haproxy.Node
	var servers []*httptest.Server
	for i := range 3 {
		name := fmt.Sprintf("n%d", i)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, name)
		}))
		t.Cleanup(s.Close)
		servers = append(servers, s)
		nodes = append(nodes, haproxy.Node{Name: name, Addr: strings.TrimPrefix(s.URL, "http://")})
	}
	b, err := haproxy.Start(t.TempDir(), ports.Addr(t), nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	get := func() (body, header string) {
		t.Helper()
		resp, err := http.Get("http://" + b.Addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("through the balancer: %s %s", resp.Status, raw)
		}
		return string(raw), resp.Header.Get(haproxy.NodeHeader)
	}
	seen := map[string]int{}
	for range 6 {
		body, node := get()
		if body != node {
			t.Fatalf("answered by %s, the header says %s", body, node)
		}
		seen[body]++
	}
	if seen["n0"] != 2 || seen["n1"] != 2 || seen["n2"] != 2 {
		t.Fatalf("six requests round-robin over three nodes: %v", seen)
	}
	servers[1].Close()
	for range 6 {
		if body, _ := get(); body == "n1" {
			t.Fatal("a closed node answered")
		}
	}
}

func writeFile(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o600)
}

// The README's configuration is the one the tests run, for three nodes on
// the addresses it names: the block a user copies is the one proven here
// and by the end-to-end suite.
func TestREADMEGivesTheConfigurationTheTestsRun(t *testing.T) {
	raw, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "\n```haproxy\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	if !ok || !ok2 {
		t.Fatal("README has no ```haproxy block")
	}
	want := haproxy.Config(":8420", []haproxy.Node{{Name: "a", Addr: "10.0.0.1:8420"}, {Name: "b", Addr: "10.0.0.2:8420"}, {Name: "c", Addr: "10.0.0.3:8420"}})
	if block != want {
		t.Fatalf("README's HAProxy configuration:\n%s\nthe one the tests run:\n%s", block, want)
	}
}
