package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamSaw is what a recording upstream was told by the hub that
// connected to it: the header X-Key on its first request, and the client
// name the hub gave in initialize.
type upstreamSaw struct {
	key    chan string
	client chan string
}

// recordingUpstream is a real MCP server over streamable HTTP on loopback
// that records, once each, the X-Key header it is sent and the clientInfo
// name of the session that initializes it.
func recordingUpstream(t *testing.T) (string, upstreamSaw) {
	t.Helper()
	saw := upstreamSaw{key: make(chan string, 1), client: make(chan string, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "0"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
				select {
				case saw.client <- p.ClientInfo.Name:
				default:
				}
			}
		}})
	s.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case saw.key <- r.Header.Get("X-Key"):
		default:
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.Close()
	})
	return srv.URL + "/", saw
}

// first waits for the one value ch records.
func first(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("the upstream was never sent %s", what)
		return ""
	}
}

// runWithRecorder runs a node whose one MCP server is a recording
// upstream, its header X-Key read from ${REC_KEY}: sealed in the node's
// secret store as sealed, and in its environment as env (each when not
// empty).
func runWithRecorder(t *testing.T, sealed, env string) upstreamSaw {
	t.Helper()
	url, saw := recordingUpstream(t)
	dir := t.TempDir()
	if sealed != "" {
		st, err := secrets.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Set("REC_KEY", sealed); err != nil {
			t.Fatal(err)
		}
	}
	cfg := hubtest.NewCompany().Server(fmt.Sprintf(`{name: rec, url: %q, headers: {X-Key: "${REC_KEY}"}}`, url)).Write(t)
	_, _, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: dir,
		LookupEnv: func(k string) (string, bool) { return env, k == "REC_KEY" && env != "" }})
	t.Cleanup(func() { _ = stop() })
	return saw
}

// CFG-2: a ${VAR} resolves from the secret store first, then the
// environment: with REC_KEY both sealed and exported, the server is sent
// the sealed value; with it only exported, the exported one.
func TestSealedSecretWinsOverEnvironment(t *testing.T) {
	if got := first(t, runWithRecorder(t, "sealed-value-1234", "exported-value-5678").key, "X-Key"); got != "sealed-value-1234" {
		t.Fatalf("the server was sent X-Key %q, want the sealed value", got)
	}
	if got := first(t, runWithRecorder(t, "", "exported-value-5678").key, "X-Key"); got != "exported-value-5678" {
		t.Fatalf("with nothing sealed the server was sent X-Key %q, want the exported value", got)
	}
}

// MCP-3: the hub identifies itself to a third-party server as crewlet in
// initialize.
func TestHubIdentifiesAsCrewletUpstream(t *testing.T) {
	if got := first(t, runWithRecorder(t, "", "k").client, "initialize"); got != "crewlet" {
		t.Fatalf("the hub's initialize named the client %q, want crewlet", got)
	}
}
