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
	"github.com/crewlet/hub/servers/upstream"
)

// perRoleHub runs a hub whose seat alice has a per-role child: this test
// binary serving the bench echo server.
func perRoleHub(t *testing.T) *Hub {
	t.Helper()
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
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// CFG-6: a seat's per-role child runs while this node acts for the seat;
// releasing the seat stops it and takes its tools out of the seat's
// registry, claiming it again starts a new one. Only agent seats are
// claimed.
func TestClaimReleaseSeat(t *testing.T) {
	h := perRoleHub(t)
	first := h.servers.instanceOf("echo@alice")
	if first == nil {
		t.Fatal("alice's child did not start with the hub")
	}
	if err := h.ReleaseSeat(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if h.servers.instanceOf("echo@alice") != nil {
		t.Fatal("alice's child is still held after release")
	}
	if st := first.Status(); st.State != upstream.StateStopped {
		t.Fatalf("the released child's state: %+v", st)
	}
	if _, ok := h.SeatRegistry("alice").Resolve("echo"); ok {
		t.Fatal("a released seat still offers its child's tool")
	}
	if got := h.HeldSeats(); len(got) != 1 || got[0] != "bob" {
		t.Fatalf("held seats after release: %v", got)
	}
	if err := h.ClaimSeat(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	again := h.servers.instanceOf("echo@alice")
	if again == nil || again == first {
		t.Fatal("claiming alice did not start a new child")
	}
	if _, ok := h.SeatRegistry("alice").Resolve("echo"); !ok {
		t.Fatal("the claimed seat's child tool is not offered")
	}
	if err := h.ClaimSeat(t.Context(), "ada"); err == nil {
		t.Fatal("a person's seat was claimed")
	}
}

// CFG-7: a frozen registry keeps offering what it offered when it was
// frozen; the tool of a child stopped since answers unavailable rather
// than vanishing, and the next freeze sees the change.
func TestFrozenRegistry(t *testing.T) {
	h := perRoleHub(t)
	frozen := h.SeatRegistry("alice").Freeze()
	if err := h.ReleaseSeat(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := frozen.Resolve("echo"); !ok {
		t.Fatal("the frozen registry lost a tool")
	}
	caller := authority.Caller{Seat: "alice", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	res := h.Router().Call(t.Context(), frozen, caller, "echo", []byte(`{"text":"x"}`))
	if c, _ := servers.ClassOf(res); c != authority.Unavailable {
		t.Fatalf("a call to a stopped child: class %q %s", c, textOf(res))
	}
	if _, ok := h.SeatRegistry("alice").Freeze().Resolve("echo"); ok {
		t.Fatal("the next freeze still offers the stopped child's tool")
	}
	if len(frozen.Entries()) != len(h.SeatRegistry("alice").Entries())+1 {
		t.Fatalf("frozen %d entries, now %d", len(frozen.Entries()), len(h.SeatRegistry("alice").Entries()))
	}
}
