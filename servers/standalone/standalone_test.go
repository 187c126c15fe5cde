package standalone_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/standalone"
	"github.com/crewlet/hub/tracker-mcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, searchtest.LeakOptions()...) }

func directory(string) (*authority.Directory, error) {
	return authority.NewDirectory([]authority.Unit{{ID: "core", Name: "Core", Lead: "admin", Project: "CORE"}}, []authority.Seat{
		{Handle: "admin", Kind: authority.SeatHuman, Unit: "core", Admin: true},
		{Handle: "assistant", Kind: authority.SeatAgent, Unit: "core"},
	}), nil
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// running is a standalone tracker served by Run on its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	})
}

func start(t *testing.T, args []string, opts standalone.Options) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- standalone.Run(ctx, tracker.Standalone, args, opts) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stdioClient runs the tracker over pipes and connects a plain client to
// it: one that puts nothing in its requests' metadata.
func stdioClient(t *testing.T, args []string, vars map[string]string) *mcp.ClientSession {
	t.Helper()
	return stdioClientWith(t, args, standalone.Options{Directory: directory, Getenv: env(vars)})
}

// stdioClientWith is stdioClient with the runner's options.
func stdioClientWith(t *testing.T, args []string, opts standalone.Options) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts.Stdin, opts.Stdout, opts.Stderr = inR, outW, io.Discard
	r := start(t, args, opts)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The client going away ends its stream: the server reads EOF, as
		// a stdio server does when its client exits.
		cs.Close()
		inW.Close()
		outR.Close()
		r.stop(t)
	})
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out, !res.IsError
}

// --as over stdio: a plain MCP client (the Inspector, an IDE) files and
// reads items as the seat the person who started the process named.
func TestAsOverStdio(t *testing.T) {
	dir := t.TempDir()
	cs := stdioClient(t, []string{"--as", "admin", "--data-dir", dir}, nil)
	out, ok := call(t, cs, "create_work_item", map[string]any{"title": "Filed by a plain client"})
	if !ok || out["outcome"] != "applied" || out["key"] != "CORE-1" {
		t.Fatalf("create: %v", out)
	}
	got, ok := call(t, cs, "get_work_item", map[string]any{"key": "CORE-1"})
	if !ok || got["item"].(map[string]any)["created_by"] != "admin" {
		t.Fatalf("get: %v", got)
	}
	// The person's own write answers its op_id, as on the operator surface.
	if out["op_id"] == nil {
		t.Fatalf("a person's write answered no op_id: %v", out)
	}
}

// An agent seat named with --as writes as that seat, the process being one
// turn: the same call again is the same operation.
func TestAsAgentSeatIsOneTurn(t *testing.T) {
	cs := stdioClient(t, []string{"--as", "assistant", "--data-dir", t.TempDir()}, nil)
	a, ok := call(t, cs, "create_work_item", map[string]any{"title": "Once"})
	b, ok2 := call(t, cs, "create_work_item", map[string]any{"title": "Once"})
	if !ok || !ok2 || a["key"] != b["key"] || a["op_id"] != nil {
		t.Fatalf("the same call twice in one process: %v then %v", a, b)
	}
}

// --as over HTTP gives the seat only to a client presenting the trusted
// token as its bearer; anyone else is refused forbidden.
func TestAsOverHTTP(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	var mu sync.Mutex
	start(t, []string{"--as", "admin", "--http", "127.0.0.1:0", "--data-dir", dir},
		standalone.Options{Directory: directory, Getenv: env(map[string]string{"CREWLET_TRUSTED_CALLER": "tok-1"}), Stdout: lockedWriter{&mu, &out}, Stderr: io.Discard})
	addr := waitAddr(t, filepath.Join(dir, "listen-addr"))
	// The test's own pool, emptied at the end: a connection dialled and left
	// unused would otherwise hold the server's graceful shutdown open.
	pool := &http.Transport{}
	t.Cleanup(pool.CloseIdleConnections)
	connect := func(token string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/", HTTPClient: &http.Client{Transport: bearer{token, pool}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	if res, ok := call(t, connect("tok-1"), "create_work_item", map[string]any{"title": "Over HTTP"}); !ok || res["key"] != "CORE-1" {
		t.Fatalf("with the token: %v", res)
	}
	res, ok := call(t, connect("a-guess"), "create_work_item", map[string]any{"title": "Not trusted"})
	if ok || res["class"] != "forbidden" {
		t.Fatalf("without the token: %v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "tracker MCP server on http://"+addr+"/") {
		t.Fatalf("the listening line: %q", out.String())
	}
}

// The server's Open hook opens its search index under the data directory,
// with the embeddings model the company file names: over stdio, a plain
// client finds an item by what it means.
func TestSearchIndexAndEmbedder(t *testing.T) {
	dir := t.TempDir()
	p := searchtest.NewProvider(t)
	var asked string
	emb := func(cfg string, getenv func(string) string) (search.Embedder, error) {
		asked = cfg
		return search.NewOpenAIEmbedder(p.BaseURL(), getenv("TEST_KEY"), searchtest.Model, 8192), nil
	}
	cs := stdioClientWith(t, []string{"--as", "admin", "--data-dir", dir, "--config", "company.yaml"},
		standalone.Options{Directory: directory, Getenv: env(map[string]string{"TEST_KEY": "sk-local"}), Embedder: emb})
	if _, ok := call(t, cs, "create_work_item", map[string]any{"title": "My automobile will not start"}); !ok {
		t.Fatal("create refused")
	}
	if asked != "company.yaml" {
		t.Fatalf("the embedder was made for %q", asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "search", tracker.SearchKind)); err != nil {
		t.Fatalf("the search index is not under the data directory: %v", err)
	}
	// Embedding runs behind the write; until the item has its vector a
	// semantic search says it has nothing to rank by meaning.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, ok := call(t, cs, "search_work_items", map[string]any{"query": "car", "mode": "semantic"})
		if !ok {
			t.Fatalf("search: %v", out)
		}
		if out["mode"] == "semantic" {
			items := out["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["key"] != "CORE-1" {
				t.Fatalf("semantic: %v", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the item was never embedded: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, a := range p.Authorizations() {
		if a != "Bearer sk-local" {
			t.Fatalf("the provider was sent %q", a)
		}
	}
}

// Start-up refusals: each says what to do instead of running a server that
// refuses every call.
func TestRunRefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"no token and no seat", []string{}, nil, "CREWLET_TRUSTED_CALLER"},
		{"a seat nobody holds", []string{"--as", "ghost"}, nil, "ghost"},
		{"a seat over HTTP without a token", []string{"--as", "admin", "--http", "127.0.0.1:0"}, nil, "--as over --http"},
	} {
		err := standalone.Run(t.Context(), tracker.Standalone, append(tc.args, "--data-dir", t.TempDir()),
			standalone.Options{Directory: directory, Getenv: env(tc.vars), Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

func waitAddr(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatal("the server wrote no listen-addr")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
