package hub

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/hub/toolscan"
	"github.com/crewlet/hub/servers/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listServerVar makes the test binary a go-sdk stdio server whose tools
// are the lines of the file listFileVar names ("name<TAB>description"),
// read at start and again at each SIGUSR1: a tool gone from the file is
// removed, a new or redescribed one added, and the SDK tells the client
// notifications/tools/list_changed. Its pid goes to the file
// listPidVar names.
const (
	listServerVar = "CREWLET_HUB_LIST_SERVER"
	listFileVar   = "CREWLET_HUB_LIST_FILE"
	listPidVar    = "CREWLET_HUB_LIST_PID"
)

func init() {
	if os.Getenv(listServerVar) != "1" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "list server:", err)
		os.Exit(1)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "lister", Version: "0"}, nil)
	have := map[string]string{}
	load := func() {
		b, err := os.ReadFile(os.Getenv(listFileVar))
		if err != nil {
			fail(err)
		}
		want := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			name, desc, _ := strings.Cut(line, "\t")
			want[name] = desc
		}
		var gone []string
		for name := range have {
			if _, ok := want[name]; !ok {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			s.RemoveTools(gone...)
		}
		for name, desc := range want {
			if d, ok := have[name]; ok && d == desc {
				continue
			}
			s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
				})
		}
		have = want
	}
	load()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			load()
		}
	}()
	if err := os.WriteFile(os.Getenv(listPidVar), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		fail(err)
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// listRig is a pinRig whose one server is the list server.
type listRig struct {
	*pinRig
	list string
}

func newListRig(t *testing.T, tools ...string) *listRig {
	t.Helper()
	return newListRigTrust(t, "pinned", tools...)
}

// newListRigTrust is newListRig with the server's trust key.
func newListRigTrust(t *testing.T, trust string, tools ...string) *listRig {
	t.Helper()
	node, err := state.Open(context.Background(), state.Options{Dir: filepath.Join(t.TempDir(), "state"), Projectors: toolpin.Projectors()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	dir := t.TempDir()
	r := &listRig{pinRig: &pinRig{t: t, pid: filepath.Join(dir, "pid"), node: node, store: toolpin.NewStore(node)}, list: filepath.Join(dir, "list")}
	r.setList(tools...)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf(`{name: lister, command: %q, env: {%s: "1", %s: %q, %s: %q}, trust: %s}`, exe, listServerVar, listFileVar, r.list, listPidVar, r.pid, trust)
	c := hubtest.NewCompany().Person("ada", true).Agent("bot").Token("laptop", "ADA_TOKEN", "ada").Server(entry).Parse(t)
	logs, log := hubtest.NewLog(slog.LevelInfo)
	r.logs = logs
	h, err := New(context.Background(), Options{Company: c, Logger: log, Pins: r.store,
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": pinToken}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	r.h = h
	r.url = hubtest.Serve(t, h.Handler())
	return r
}

// setList writes the server's tools, each "name<TAB>description".
func (r *listRig) setList(tools ...string) {
	r.t.Helper()
	if err := os.WriteFile(r.list, []byte(strings.Join(tools, "\n")), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// relist has the running server read its list again and say its tools
// changed.
func (r *listRig) relist() {
	r.t.Helper()
	b, err := os.ReadFile(r.pid)
	if err != nil {
		r.t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		r.t.Fatal(err)
	}
}

// flagsOf is the scanner's flags on a held tool, by kind.
func (r *listRig) flagsOf(name string) []toolscan.Kind {
	var out []toolscan.Kind
	for _, c := range r.h.toolChanges() {
		if c.Name == name {
			for _, f := range c.Flags {
				out = append(out, f.Kind)
			}
		}
	}
	return out
}

// Issue 36 (finding 6): a pinned server listing names a reviewer cannot
// tell from another's. A name outside [A-Za-z0-9_.-] (a Cyrillic e, a
// zero-width space, a right-to-left override) is never offered, held or
// approvable: it is logged with the server and the name's hidden
// characters written out, and shown on the server's status. A name that
// differs from another offered one only in case is held like any new
// tool, flagged confusable_name for the reviewer.
func TestToolNamesAReviewerCannotSeeAreRefusedOrFlagged(t *testing.T) {
	r := newListRig(t, "lookup_colleague\tFind a colleague by name.", "lookup_colleagu\u0435\tFind a colleague by name.",
		"echo\u200b\tAnswer the text given.", "e\u202ecf\tAnswer the text given.", "Lookup_Colleague\tFind a colleague by name.")
	r.await("the lister's tools filed", func() bool { return r.held("Lookup_Colleague") != "absent" })
	for _, name := range []string{"lookup_colleagu\u0435", "echo\u200b", "e\u202ecf"} {
		if s := r.held(name); s != "absent" {
			t.Errorf("%s is in the catalogue (%s)", toolscan.ShowName(name), s)
		}
		shown := toolscan.ShowName(name)
		if len(r.logs.Lines(`"msg":"tool_name_refused"`, `"server":"lister"`, strconv.Quote(shown))) != 1 {
			t.Errorf("no tool_name_refused line for %s:\n%s", shown, r.logs.String())
		}
	}
	if strings.Contains(r.logs.String(), "\u0435") || strings.Contains(r.logs.String(), "\u202e") {
		t.Error("the log carries a refused name's characters as themselves")
	}
	if s := r.held("lookup_colleague"); s != heldNew {
		t.Fatalf("lookup_colleague is %s, want held new", s)
	}
	if got := r.flagsOf("Lookup_Colleague"); !slices.Contains(got, toolscan.ConfusableName) {
		t.Fatalf("Lookup_Colleague's flags: %v", got)
	}
	if got := r.flagsOf("lookup_colleague"); !slices.Contains(got, toolscan.ConfusableName) {
		t.Fatalf("lookup_colleague's flags: %v", got)
	}
	var body struct {
		Servers []serverRow `json:"servers"`
	}
	getJSON(t, r.url+"/mcp-servers", pinToken, &body)
	if len(body.Servers) != 1 || !slices.Equal(body.Servers[0].RefusedToolNames, []string{"e<U+202E>cf", "echo<U+200B>", "lookup_colleagu<U+0435>"}) {
		t.Fatalf("the server's status: %+v", body.Servers)
	}
}

// Issue 36 (finding 6): on a server trusted as it lists its tools, a name
// that reads as another offered one is offered, as the trust says, and
// logged (tool_name_confusable) naming both; a name outside the set is
// refused there too.
func TestConfusableNamesOfATrustedServerAreLogged(t *testing.T) {
	r := newListRigTrust(t, "auto", "lookup_colleague\tFind a colleague by name.", "Lookup_Colleague\tFind a colleague by name.",
		"echo\u200b\tAnswer the text given.")
	r.await("the lister's tools filed", func() bool { return r.held("Lookup_Colleague") == "offered" })
	if s := r.held("echo\u200b"); s != "absent" {
		t.Fatalf("echo<U+200B> on a trusted server is %s", s)
	}
	lines := r.logs.Lines(`"msg":"tool_name_confusable"`, `"server":"lister"`, `"tool":"Lookup_Colleague"`, `only in case`)
	if len(lines) != 1 || !strings.Contains(lines[0], "lookup_colleague") {
		t.Fatalf("tool_name_confusable for Lookup_Colleague: %q\n%s", lines, r.logs.String())
	}
}
