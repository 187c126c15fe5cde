package hub

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
)

// CAT-10, CAT-11: a seat's registry resolves its own child's tools first and
// the company's after; another seat, and the operator catalogue, do not
// reach them. The child is this test binary serving the bench echo server.
func TestSeatRegistryReachesOnlyItsOwnChild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - name: Alice
        handle: alice
        mcp_env: {echo: {%s: stdio}}
      - {name: Bob, handle: bob}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: echo, shared: false, command: %q}
`, benchEchoVar, exe)
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Options{Company: c, StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	alice, bob := h.SeatRegistry("alice"), h.SeatRegistry("bob")
	if e, ok := alice.Resolve("echo"); !ok || e.Source != SourceMCP("echo") {
		t.Fatalf("alice's registry: %+v %v", e, ok)
	}
	if _, ok := bob.Resolve("echo"); ok {
		t.Fatal("bob reaches alice's child")
	}
	if _, ok := alice.Resolve("echo"); !ok {
		t.Fatal("alice lost her child")
	}
	caller := authority.Caller{Seat: "alice", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	res := h.Router().Call(context.Background(), alice, caller, "echo", []byte(`{"text":"mine"}`))
	if res.IsError || textOf(res) != "mine" {
		t.Fatalf("alice's call: %+v %q", res.IsError, textOf(res))
	}
	// Bob and the operator are told the tool exists but is not theirs.
	for name, reg := range map[string]Registry{"bob": bob, "operator": CompanyRegistry(h.Catalogue())} {
		res := h.Router().Call(context.Background(), reg, caller, "echo", nil)
		if c, _ := servers.ClassOf(res); c != authority.Forbidden {
			t.Errorf("%s calling alice's tool: class %q", name, c)
		}
	}
}
