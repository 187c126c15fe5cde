package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kitServer is a first-party server holding the echo tool, so a builtin
// name is there to collide with.
func kitServer() FirstParty {
	return FirstParty{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
		servers.Register(s, tr, nil, echoTool())
		return s
	}}
}

// CAT-12: a revision under which two tools would carry one name is refused
// at apply, naming both tools and their sources; the revision in force
// stays, and so do its tools. Reload answers the same refusal.
func TestCollisionRefusedAtApply(t *testing.T) {
	ext := hubtest.Upstream(t, &mcp.Tool{Name: "echo"}, &mcp.Tool{Name: "search"})
	docs := hubtest.Upstream(t, &mcp.Tool{Name: "search"})
	fixture := func(extPrefix, docsPrefix string) *hubtest.Company {
		return hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
			Server(fmt.Sprintf(`{name: ext, url: %q, tool_prefix: %q}`, ext, extPrefix)).
			Server(fmt.Sprintf(`{name: docs, url: %q, tool_prefix: %q}`, docs, docsPrefix))
	}
	next := fixture("ext_", "docs_").Parse(t)
	h, err := New(context.Background(), Options{Company: next, FirstParty: []FirstParty{kitServer()},
		Env:    hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup,
		Reload: func() (*config.Company, error) { return next, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	for _, name := range []string{"echo", "ext_echo", "ext_search", "docs_search"} {
		if _, ok := h.Catalogue().Get(name); !ok {
			t.Fatalf("%s not filed at start", name)
		}
	}

	for _, tc := range []struct {
		name       string
		rev        *config.Company
		tool, a, b string
	}{
		{"builtin", fixture("", "docs_").Parse(t), "echo", "builtin", "mcp:ext"},
		{"two servers", fixture("x_", "x_").Parse(t), "x_search", "mcp:ext", "mcp:docs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.Apply(tc.rev)
			var v config.Violations
			if !errors.As(err, &v) {
				t.Fatalf("apply: %v, want violations", err)
			}
			for _, want := range []string{fmt.Sprintf("%q", tc.tool), tc.a, tc.b} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not name %s", err, want)
				}
			}
			if h.Company().MCPServers[0].ToolPrefix != "ext_" {
				t.Fatal("the refused revision is in force")
			}
			if e, ok := h.Catalogue().Get("ext_echo"); !ok || e.Source != SourceMCP("ext") {
				t.Fatal("the tools in force moved")
			}
			// The same revision by reload: 422, naming the collision.
			next = tc.rev
			req, _ := http.NewRequest("POST", hubtest.Serve(t, h.Handler())+"/config/reload", nil)
			resp, err := hubtest.Client("ada-token-123456").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("reload of a colliding revision: %d", resp.StatusCode)
			}
		})
	}
}

// CAT-10, CAT-12: a seat's own child that lists a name the company
// catalogue holds is not filed for that seat, so it never shadows the
// company's tool; the refusal names both tools' sources and shows in the
// server's row of GET /mcp-servers.
func TestSeatToolNeverShadowsCompanyTool(t *testing.T) {
	url := hubtest.Upstream(t, &mcp.Tool{Name: "echo"}, &mcp.Tool{Name: "own"})
	c := hubtest.NewCompany().Person("ada", true).Agent("alice", `{perrole: {X-Seat: alice}}`).
		Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: perrole, shared: false, url: %q}`, url)).Parse(t)
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{kitServer()},
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	if e, ok := h.SeatRegistry("alice").Resolve("echo"); !ok || e.Source != SourceBuiltin {
		t.Fatalf("alice's echo resolves to %q (%v), want the company's builtin", e.Source, ok)
	}
	var body struct {
		Servers []serverRow `json:"servers"`
	}
	getJSON(t, hubtest.Serve(t, h.Handler())+"/mcp-servers", "ada-token-123456", &body)
	row := body.Servers[0]
	if row.State != rowFailing || !strings.Contains(row.Reason, `"echo"`) || !strings.Contains(row.Reason, "builtin") ||
		!strings.Contains(row.Reason, "mcp:perrole") || !strings.Contains(row.Reason, "alice") {
		t.Fatalf("row %+v, want Failing naming echo, builtin, mcp:perrole and the seat", row)
	}
}

// markVar marks a stdio child of a test with a value of its own, so the
// test can find that very process among the test binary's children.
const markVar = "CREWLET_HUB_TEST_MARK"

// echoChild is an mcp_servers entry running this test binary as the bench
// echo server (one tool, echo), marked mark.
func echoChild(t *testing.T, name, prefix, mark string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{name: %s, command: %q, tool_prefix: %q, env: {%s: stdio, %s: %q}}`, name, exe, prefix, benchEchoVar, markVar, mark)
}

// marked lists the live child processes of this test binary that carry
// markVar=mark in their environment: how a test tells a child that was
// stopped from one left running.
func marked(mark string) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				continue // gone since the listing
			}
			if slices.Contains(strings.Split(string(env), "\x00"), markVar+"="+mark) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// awaitInstance waits, by the hub's change feed, until the instance in
// force under key reads state, failing the test after within.
func awaitInstance(t *testing.T, h *Hub, key string, state upstream.State, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		_, changed := h.operator.changes.watch()
		in := h.servers.instanceOf(key)
		if in != nil && in.Status().State == state {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s is not %s after %s", key, state, within)
		}
	}
}

// awaitRow waits, by the hub's change feed, until a server's row reads
// state, and answers it.
func awaitRow(t *testing.T, h *Hub, server, state string, within time.Duration) serverRow {
	t.Helper()
	deadline := time.After(within)
	for {
		_, changed := h.operator.changes.watch()
		for _, r := range h.serverRows() {
			if r.Name == server && r.State == state {
				return r
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s's row is not %s after %s: %+v", server, state, within, h.serverRows())
		}
	}
}

// awaitExit waits until each of pids, children of this test binary, has
// exited, failing the test after within. waitid with WNOWAIT blocks until
// the exit and leaves the child unreaped, for the hub's own wait; a child
// already reaped answers at once.
func awaitExit(t *testing.T, pids []int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for _, pid := range pids {
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			var info [128]byte // a siginfo_t, unread
			for {
				_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid),
					uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
				if errno != syscall.EINTR {
					return
				}
			}
		}()
		select {
		case <-exited:
		case <-deadline:
			t.Fatalf("process %d still runs after %s", pid, within)
		}
	}
}

// CAT-12: a server whose tools are refused for a name collision is
// stopped, its process with it, rather than left running unused until
// the hub stops; its row says the collision and that it was stopped. An
// apply that frees the names starts it again, and its tools are filed.
func TestCollidingServerIsStoppedThenStartedWhenFreed(t *testing.T) {
	mark := func(s string) string { return t.Name() + "/" + s }
	parse := func(entries ...string) *config.Company {
		doc := testCompany + "mcp_servers:\n"
		for _, e := range entries {
			doc += "  - " + e + "\n"
		}
		c, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s\n%v", doc, err)
		}
		return c
	}
	first, second := echoChild(t, "first", "x_", mark("first")), echoChild(t, "second", "x_", mark("second"))
	th := newTestHub(t, func(o *Options) { o.Company = parse(first) })
	awaitInstance(t, th.Hub, "first", upstream.StateRunning, 20*time.Second)

	// second lists x_echo too, which first holds: refused, and stopped,
	// its process with it.
	if err := th.Apply(parse(first, second)); err != nil {
		t.Fatal(err)
	}
	row := awaitRow(t, th.Hub, "second", rowFailing, 20*time.Second)
	awaitExit(t, marked(mark("second")), 20*time.Second)
	if pids := marked(mark("first")); len(pids) != 1 {
		t.Fatalf("first's process: %v, want the one running", pids)
	}
	if !strings.Contains(row.Reason, "collision") || !strings.Contains(row.Reason, "stopped it") {
		t.Fatalf("second's row %+v, want the collision, and that it was stopped", row)
	}
	if e, _ := th.Catalogue().Get("x_echo"); e.Source != SourceMCP("first") {
		t.Fatalf("x_echo is %s's", e.Source)
	}

	// first gone, second's names are free: the apply starts it again.
	if err := th.Apply(parse(second)); err != nil {
		t.Fatal(err)
	}
	awaitInstance(t, th.Hub, "second", upstream.StateRunning, 20*time.Second)
	if e, ok := th.Catalogue().Get("x_echo"); !ok || e.Source != SourceMCP("second") {
		t.Fatalf("x_echo after first left: %q %v", e.Source, ok)
	}
	if pids := marked(mark("second")); len(pids) != 1 {
		t.Fatalf("second's process after the apply: %v", pids)
	}
}
