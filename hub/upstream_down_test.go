package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// crashyVar makes the test binary be the stdio upstream of the tests in
// this file: a server whose tools can kill their own process mid-call or
// hold a call until the server is stopped. Like benchEchoVar it is read in
// an init, before TestMain and its leak check.
const crashyVar = "CREWLET_HUB_TEST_CRASHY"

func init() {
	if os.Getenv(crashyVar) != "stdio" {
		return
	}
	if err := crashyServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "crashy:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type crashyIn struct {
	Crash bool `json:"crash,omitempty"`
}

// crashyServer has a tool that writes (no hints: it may have an effect), one
// that only reads, and one that answers only when the server stops.
func crashyServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crashy", Version: "0"}, nil)
	run := func(name string) func(context.Context, *mcp.CallToolRequest, crashyIn) (*mcp.CallToolResult, any, error) {
		return func(_ context.Context, _ *mcp.CallToolRequest, in crashyIn) (*mcp.CallToolResult, any, error) {
			if in.Crash {
				fmt.Fprintln(os.Stderr, "crashing in", name)
				os.Exit(3)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done"}}}, nil, nil
		}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "write_note", Description: "Write a note."}, run("write_note"))
	mcp.AddTool(s, &mcp.Tool{Name: "read_notes", Description: "Read the notes.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, run("read_notes"))
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "Answer when the server stops."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ crashyIn) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "holding the call")
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return s
}

// logEvents is a slog handler that hands the hub's log records to a test as
// they happen, so it waits for the event itself rather than for a while.
// Attributes a logger was given with With are added to each record.
type logEvents struct {
	ch    chan slog.Record
	attrs []slog.Attr
}

func (logEvents) Enabled(context.Context, slog.Level) bool { return true }
func (e logEvents) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(e.attrs...)
	select {
	case e.ch <- r:
	default: // a test that stopped listening must not block the hub
	}
	return nil
}
func (e logEvents) WithAttrs(as []slog.Attr) slog.Handler {
	return logEvents{e.ch, append(append([]slog.Attr(nil), e.attrs...), as...)}
}
func (e logEvents) WithGroup(string) slog.Handler { return e }

// await returns the first record with the message msg whose attributes
// include every want (key=value as slog prints them), or fails after d.
func (e logEvents) await(t *testing.T, d time.Duration, msg string, want ...string) slog.Record {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case r := <-e.ch:
			if r.Message != msg {
				continue
			}
			attrs := map[string]bool{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.String()] = true; return true })
			all := true
			for _, w := range want {
				all = all && attrs[w]
			}
			if all {
				return r
			}
		case <-deadline:
			t.Fatalf("no %s %v within %s", msg, want, d)
		}
	}
}

// crashyHub runs a hub whose one MCP server is the crashy child, with its
// log records sent to the returned logEvents.
func crashyHub(t *testing.T) (*Hub, logEvents) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: crashy, command: %q, env: {%s: stdio}}
`, exe, crashyVar)
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ev := logEvents{ch: make(chan slog.Record, 1024)}
	h, err := New(context.Background(), Options{Company: c, Logger: slog.New(ev), StartupWait: 10 * time.Second,
		Env: func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Catalogue().Get("write_note"); !ok {
		h.Close()
		t.Fatal("the crashy server's tools were not listed")
	}
	return h, ev
}

// downAnswer is what a caller reads off a refusal of a down server.
type downAnswer struct {
	class    authority.Class
	sentence string
	data     map[string]any
}

func readDown(t *testing.T, res *mcp.CallToolResult) downAnswer {
	t.Helper()
	var body struct {
		Sentence string         `json:"sentence"`
		Data     map[string]any `json:"data"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &body)
	class, _ := servers.ClassOf(res)
	if !res.IsError || body.Sentence != textOf(res) {
		t.Fatalf("not a refusal: isError %v, text %q, structured %s", res.IsError, textOf(res), b)
	}
	return downAnswer{class, body.Sentence, body.Data}
}

// nextRestartIn reads the seconds of "Its next restart is in Ns." off a
// sentence, or -1.
var nextRestartRe = regexp.MustCompile(`Its next restart is in (\d+)s\.`)

func nextRestartIn(sentence string) int {
	m := nextRestartRe.FindStringSubmatch(sentence)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// MCP-6, MCP-7: a server's tools stay listed while it is down and refuse
// unavailable, naming the server, what took it down and when it restarts.
// A call that was in flight when the server died may have taken effect,
// and says so, unless its tool is known to be read-only; a call made
// while the server was already down was never sent, and says nothing of
// the kind. Every call here goes through the operator front, as a client
// would see it.
func TestCallsToADownServer_MCP6(t *testing.T) {
	h, ev := crashyHub(t)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() { h.Close(); srv.Close() })
	cs := hubtest.Connect(t, srv.URL+"/operator/mcp", "ada-token-123456", "2026-07-28")
	call := func(tool string, args map[string]any) downAnswer {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s reached the client as a protocol error: %v", tool, err)
		}
		return readDown(t, res)
	}
	const died = "its process exited with status 3"

	// In flight on a tool that may write, at the first death: restarted
	// at once.
	got := call("write_note", map[string]any{"crash": true})
	if got.class != authority.Unavailable || !strings.Contains(got.sentence, `"crashy"`) || !strings.Contains(got.sentence, died) ||
		!strings.Contains(got.sentence, "being restarted now") || !strings.Contains(got.sentence, "may have taken effect") ||
		got.data["may_have_taken_effect"] != true || got.data["server"] != "crashy" {
		t.Fatalf("in flight on write_note: %+v", got)
	}
	ev.await(t, 10*time.Second, "server_restarted", "server=crashy")

	// In flight on a read-only tool, at a second death soon after the
	// first: the schedule's first wait, 15 s spread by 20 %.
	got = call("read_notes", map[string]any{"crash": true})
	if n := nextRestartIn(got.sentence); got.class != authority.Unavailable || !strings.Contains(got.sentence, `"crashy"`) ||
		!strings.Contains(got.sentence, died) || n < 11 || n > 18 ||
		strings.Contains(got.sentence, "may have taken effect") || got.data["may_have_taken_effect"] != nil {
		t.Fatalf("in flight on read_notes: %+v", got)
	}

	// Not in flight: the server is down when the call comes, so nothing
	// was sent, whatever the tool.
	for _, tool := range []string{"write_note", "read_notes"} {
		got = call(tool, nil)
		if n := nextRestartIn(got.sentence); got.class != authority.Unavailable || !strings.Contains(got.sentence, `"crashy"`) ||
			!strings.Contains(got.sentence, died) || n < 10 || n > 18 ||
			strings.Contains(got.sentence, "may have taken effect") || got.data["may_have_taken_effect"] != nil {
			t.Fatalf("%s while down: %+v", tool, got)
		}
		if strings.Contains(strings.ToLower(got.sentence), "broken pipe") {
			t.Fatalf("%s while down answered in the transport's words: %s", tool, got.sentence)
		}
	}
	// Down is not gone: the tools stay listed.
	for _, tool := range []string{"write_note", "read_notes", "hold"} {
		if _, ok := h.Catalogue().Get(tool); !ok {
			t.Errorf("%s left the catalogue while its server was down", tool)
		}
	}
}

// MCP-6: a call in flight when the engine itself stops the server is
// refused the same way, as possibly having taken effect.
func TestCallInFlightWhenTheHubStops_MCP6(t *testing.T) {
	h, ev := crashyHub(t)
	defer h.Close()
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		answer <- h.Router().Call(context.Background(), CompanyRegistry(h.Catalogue()),
			authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "hold", nil)
	}()
	ev.await(t, 10*time.Second, "server_stderr", "server=crashy", "line=holding the call")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-answer:
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered when the hub stopped")
	}
	got := readDown(t, res)
	if got.class != authority.Unavailable || !strings.Contains(got.sentence, `"crashy" was stopped because the hub is shutting down`) ||
		!strings.Contains(got.sentence, "No restart is scheduled") || got.data["server"] != "crashy" || got.data["may_have_taken_effect"] != true {
		t.Fatalf("in flight at stop: %+v", got)
	}
}
