package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"

	"github.com/gavv/httpexpect/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The newcomer's path: the embedded company's unit owns a project, so an item
// is filed with nothing but a title, through the operator surface, and the
// next read on the node sees it (WR-1, WR-3, CAT-4).
func TestDefaultHubFilesAWorkItem(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "create_work_item", map[string]any{"title": "Hello from the README"})
	if res.IsError {
		t.Fatalf("create_work_item: %s", hubtest.Text(res))
	}
	var created map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &created)
	if created["outcome"] != "applied" || !strings.Contains(string(b), "CORE-1") {
		t.Fatalf("create_work_item answered %s", b)
	}
	list := callTool(t, cs, "list_work_items", map[string]any{})
	if list.IsError || !strings.Contains(hubtest.Text(list), "Hello from the README") {
		t.Fatalf("list_work_items after create: %s", hubtest.Text(list))
	}
	httpexpect.Default(t, h.baseURL()).GET("/tools").WithHeader("Authorization", "Bearer "+h.token).
		Expect().Status(http.StatusOK).JSON().Object().Value("sources").Object().Value("builtin").Number().Gt(5)
}

// CAT-4: a company on a vendor tracker gets none of the tracker's tools,
// and one on vendor backends for both opens no native store at all; the
// knowledge base comes and goes with its own backend, apart from the
// tracker's.
func TestVendorBackendsGetNoNativeTools(t *testing.T) {
	tools := func(t *testing.T, backends string) (map[string]bool, *hubProc) {
		doc := `units: [{id: core, name: Core, project: CORE, space: CORE, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
` + backends + `
api: {auth: {tokens: [{id: ada, token: "${E2E_TOKEN}", seat: ada}]}}
`
		cfg := filepath.Join(t.TempDir(), "company.yaml")
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		h := startHub(t, []string{"E2E_TOKEN=" + e2eToken}, "--config", cfg)
		cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
		if err != nil {
			t.Fatal(err)
		}
		lt, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tool := range lt.Tools {
			names[tool.Name] = true
		}
		if names["create_work_item"] {
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "x"}})
			if err != nil || res.IsError {
				t.Fatalf("create_work_item: %v %s", err, hubtest.Text(res))
			}
		}
		return names, h
	}
	t.Run("jira, native knowledge", func(t *testing.T) {
		names, _ := tools(t, "tracker: {backend: jira}")
		if names["create_work_item"] || names["list_projects"] || !names["write_page"] || !names["get_page"] {
			t.Fatalf("tools offered: %v", names)
		}
	})
	t.Run("native tracker, confluence", func(t *testing.T) {
		names, _ := tools(t, "knowledge: {backend: confluence}")
		if !names["create_work_item"] || names["write_page"] || names["list_pages"] {
			t.Fatalf("tools offered: %v", names)
		}
	})
	t.Run("jira and confluence", func(t *testing.T) {
		names, h := tools(t, "tracker: {backend: jira}\nknowledge: {backend: confluence}")
		if names["create_work_item"] || names["write_page"] {
			t.Fatalf("tools offered: %v", names)
		}
		// Every company has artifacts (CAT-5), whatever tracker and
		// knowledge base it runs, so the node's store opens for them.
		if !names["create_artifact"] {
			t.Fatalf("no artifact tools on vendor backends: %v", names)
		}
		if _, err := os.Stat(filepath.Join(h.dataDir, "state")); err != nil {
			t.Errorf("the node's store did not open for its artifacts: %v", err)
		}
	})
}

// The same scenario against the tracker run on its own (`crewlet
// tracker-mcp`), over stdio and over streamable HTTP: the trusted caller's
// token makes the caller in the metadata believed; without it, forbidden.
func TestStandaloneTracker(t *testing.T) {
	caller := map[string]any{"seat": "admin", "kind": "human", "requester": "admin", "operator_id": "e2e"}
	scenario := func(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta, untrusted mcp.Meta) {
		call := func(name string, args map[string]any, m mcp.Meta) *mcp.CallToolResult {
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args, Meta: m})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res
		}
		res := call("create_work_item", map[string]any{"title": "Filed standalone"}, meta)
		b, _ := json.Marshal(res.StructuredContent)
		if res.IsError || !strings.Contains(string(b), `"outcome":"applied"`) || !strings.Contains(string(b), "CORE-1") {
			t.Fatalf("create_work_item: %s %s", hubtest.Text(res), b)
		}
		if list := call("list_work_items", map[string]any{}, meta); list.IsError || !strings.Contains(hubtest.Text(list), "Filed standalone") {
			t.Fatalf("list_work_items: %s", hubtest.Text(list))
		}
		if untrusted == nil {
			return
		}
		res = call("create_work_item", map[string]any{"title": "Not trusted"}, untrusted)
		if s, _ := refusalClass(res.StructuredContent, res.Meta); s != "forbidden" {
			t.Fatalf("an untrusted caller: %q %s", s, hubtest.Text(res))
		}
	}
	bin := crewletBinary(t)
	env := append(os.Environ(), "CREWLET_TRUSTED_CALLER=trusted-caller-token-1")

	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(bin, "tracker-mcp", "--data-dir", t.TempDir())
		cmd.Env = env
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		scenario(t, cs,
			mcp.Meta{"crewlet/caller": caller, "crewlet/proof": "trusted-caller-token-1"},
			mcp.Meta{"crewlet/caller": caller, "crewlet/proof": "a-guess"})
	})

	t.Run("http", func(t *testing.T) {
		dir := t.TempDir()
		p := startPeerProcess(t, env, bin, "tracker-mcp", "--http", "127.0.0.1:0", "--data-dir", dir)
		var addr string
		deadline := time.Now().Add(20 * time.Second)
		for addr == "" {
			if b, err := os.ReadFile(filepath.Join(dir, "listen-addr")); err == nil {
				addr = strings.TrimSpace(string(b))
			} else if time.Now().After(deadline) {
				t.Fatalf("no listen-addr; log:\n%s", tailFile(p.LogPath, 20))
			}
			time.Sleep(20 * time.Millisecond)
		}
		connect := func(token string) *mcp.ClientSession {
			tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/", HTTPClient: hubtest.Client(token)}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctxT(t), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		trusted := connect("trusted-caller-token-1")
		// Over HTTP the token travels as the bearer header.
		scenario(t, trusted, mcp.Meta{"crewlet/caller": caller}, nil)
		// Another client without the token is not believed either.
		other := connect("not-the-token")
		res, err := other.CallTool(ctxT(t), &mcp.CallToolParams{Name: "list_work_items", Arguments: map[string]any{}, Meta: mcp.Meta{"crewlet/caller": caller}})
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := refusalClass(res.StructuredContent, res.Meta); s != "forbidden" {
			t.Fatalf("a client without the token: %q", s)
		}
	})
}

// Crash consistency: kill -9 of the hub in the middle of a stream of writes,
// restart on the same data, and no write that was answered applied is
// missing; deleting the projection rebuilds it from the log.
func TestKill9KeepsEveryAppliedWrite(t *testing.T) {
	dir := t.TempDir()
	h := startHubIn(t, dir, []string{"CREWLET_OPERATOR_TOKEN="})
	// Writers write until the hub dies under them; none stops on its own.
	// The kill comes once enough writes were answered applied, and the
	// test checks that it landed mid-stream: every writer was still
	// writing, and at least one had a call sent and not yet answered.
	const writers, before = 4, 20
	var (
		mu       sync.Mutex
		applied  []string
		other    []string // answered, but not applied: not looked for later
		killed   bool
		running  = writers
		inFlight int // calls sent before the kill that it left unanswered
	)
	var wg sync.WaitGroup
	enough := make(chan struct{})
	for w := range writers {
		cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				mu.Lock()
				sentBeforeKill := !killed
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_work_item",
					Arguments: map[string]any{"title": fmt.Sprintf("writer %d item %d", w, i)}})
				cancel()
				mu.Lock()
				if err != nil { // the hub is gone
					running--
					if sentBeforeKill {
						inFlight++
					}
					mu.Unlock()
					return
				}
				var out struct {
					Outcome string `json:"outcome"`
					Key     string `json:"key"`
				}
				b, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &out)
				if res.IsError || out.Outcome != "applied" {
					other = append(other, fmt.Sprintf("%s: %s", out.Outcome, hubtest.Text(res)))
				} else {
					applied = append(applied, out.Key)
					if len(applied) == before {
						close(enough)
					}
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("writes were not being answered applied before the kill")
	}
	mu.Lock()
	if running != writers {
		mu.Unlock()
		t.Fatalf("only %d of %d writers were still writing when the kill came", running, writers)
	}
	if err := syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		mu.Unlock()
		t.Fatal(err)
	}
	killed = true
	mu.Unlock()
	_ = h.cmd.Wait()
	wg.Wait()
	if inFlight == 0 {
		t.Fatal("no write was in flight when the hub was killed: the kill did not land mid-stream")
	}
	if len(other) > 0 {
		t.Logf("%d writes answered other than applied: %q", len(other), other)
	}
	keys := append([]string(nil), applied...)
	check := func(h *hubProc) {
		cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			res := callTool(t, cs, "get_work_item", map[string]any{"key": k})
			if res.IsError {
				t.Fatalf("%s was answered applied but is gone after the crash: %s", k, hubtest.Text(res))
			}
		}
	}
	h2 := startHubIn(t, dir, []string{"CREWLET_OPERATOR_TOKEN="})
	check(h2)
	h2.stop(t)
	if err := os.RemoveAll(filepath.Join(dir, "state", "projection")); err != nil {
		t.Fatal(err)
	}
	h3 := startHubIn(t, dir, []string{"CREWLET_OPERATOR_TOKEN="})
	check(h3)
	t.Logf("%d applied writes survived kill -9 (which left %d in flight) and a projection rebuild", len(keys), inFlight)
}

// The standalone tracker with --as, driven by clients that know nothing of
// Crewlet's caller metadata: the MCP Inspector CLI (as the README shows it)
// files an item over stdio, and a plain go-sdk client reads it back.
func TestStandaloneTrackerAsSeat(t *testing.T) {
	bin := crewletBinary(t)
	dir := t.TempDir()
	inspector := filepath.Join(npmInstalled(t), ".bin", "mcp-inspector")
	cmd := exec.CommandContext(ctxT(t), pinnedNode(t), inspector, "--cli", bin, "tracker-mcp", "--as", "admin", "--data-dir", dir,
		"--method", "tools/call", "--tool-name", "create_work_item", "--tool-arg", "title=My first item")
	cmd.Env = nodeEnv(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var res struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("inspector output is not a tool result: %v\n%s", err, stdout.String())
	}
	if res.IsError || res.StructuredContent["outcome"] != "applied" || res.StructuredContent["key"] != "CORE-1" {
		t.Fatalf("inspector's call answered %s", stdout.String())
	}

	cmd2 := exec.Command(bin, "tracker-mcp", "--as", "admin", "--data-dir", dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(ctxT(t), &mcp.CommandTransport{Command: cmd2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	got, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "get_work_item", Arguments: map[string]any{"key": "CORE-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.IsError || !strings.Contains(hubtest.Text(got), "My first item") || !strings.Contains(hubtest.Text(got), `"created_by":"admin"`) {
		t.Fatalf("get_work_item through a plain client: %s", hubtest.Text(got))
	}
}

// WR-10 through the hub: a description read through /operator/mcp that the
// hub's sanitiser changed (a secret redacted; control characters are
// refused on the way in, so none is stored to strip) still comes back under
// a fence that matches it, so writing it back — from the text a model reads
// or from the structured content — stores it once, unfenced.
func TestFencedTextSurvivesTheSanitiserRoundTrip(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
	if err != nil {
		t.Fatal(err)
	}
	raw := "Ring the bell and do not paste " + h.token + " anywhere."
	key := mustJSONField(t, callTool(t, cs, "create_work_item", map[string]any{"title": "Sanitised", "description": raw}), "key")
	read := func() (fromText, fromStructured string) {
		res := callTool(t, cs, "get_work_item", map[string]any{"key": key})
		if res.IsError {
			t.Fatalf("get_work_item: %s", hubtest.Text(res))
		}
		var text struct {
			Item struct{ Description string } `json:"item"`
		}
		if err := json.Unmarshal([]byte(hubtest.Text(res)), &text); err != nil {
			t.Fatalf("the text content is not the answer's JSON: %v", err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var structured struct {
			Item struct{ Description string } `json:"item"`
		}
		_ = json.Unmarshal(b, &structured)
		return text.Item.Description, structured.Item.Description
	}
	fromText, fromStructured := read()
	if fromText != fromStructured {
		t.Fatalf("text and structured content disagree:\n%q\n%q", fromText, fromStructured)
	}
	if strings.Contains(fromText, h.token) || !strings.HasPrefix(fromText, "<<<untrusted id=") {
		t.Fatalf("the description as read: %q", fromText)
	}
	for i, back := range []string{fromText, fromStructured} {
		if res := callTool(t, cs, "update_work_item", map[string]any{"key": key, "description": back}); res.IsError {
			t.Fatalf("write-back %d: %s", i, hubtest.Text(res))
		}
		again, _ := read()
		if n := strings.Count(again, "<<<untrusted id="); n != 1 {
			t.Fatalf("write-back %d stored the fence inside the text (%d fences): %q", i, n, again)
		}
		if !strings.Contains(again, "Ring the bell and do not paste ") {
			t.Fatalf("write-back %d: %q", i, again)
		}
	}
}

// mustJSONField reads one string field of a successful result.
func mustJSONField(t testing.TB, res *mcp.CallToolResult, field string) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("refused: %s", hubtest.Text(res))
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &m)
	s, ok := m[field].(string)
	if !ok {
		t.Fatalf("no %s in %s", field, b)
	}
	return s
}
