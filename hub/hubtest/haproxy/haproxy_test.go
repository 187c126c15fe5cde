package haproxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// A request whose node takes it and dies before answering is answered by
// the balancer in words, as a JSON-RPC error a client can show: class
// unavailable, and that the call may have taken effect.
func TestANodeDyingWithTheCallIsSaidInWords(t *testing.T) {
	// The node passes its health checks, and reads a call and closes the
	// connection unanswered, as a node killed with the call on it does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err == nil && req.URL.Path == "/healthz" {
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				}
			}()
		}
	}()
	b, err := haproxy.Start(t.TempDir(), ports.Addr(t), []haproxy.Node{{Name: "dies", Addr: ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	post := func() (int, string, string) {
		t.Helper()
		resp, err := http.Post("http://"+b.Addr+"/operator/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(raw)
	}
	status, ctype, body := post()
	var msg struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusBadGateway || ctype != "application/json" || json.Unmarshal([]byte(body), &msg) != nil ||
		!strings.HasPrefix(msg.Error.Message, "unavailable:") || !strings.Contains(msg.Error.Message, "may have taken effect") {
		t.Fatalf("a node that died with the call: %d %s %s", status, ctype, body)
	}
	if body != haproxy.DiedWithTheCall {
		t.Fatalf("the balancer's words: %s", body)
	}
}
