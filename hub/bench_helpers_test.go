package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchEchoVar makes the test binary be the stdio echo upstream of
// BenchmarkForwardViaHubStdio: the hub starts this very binary as its child
// with the variable set in the child's declared env.
const benchEchoVar = "CREWLET_HUB_BENCH_ECHO"

// The switch is an init rather than a case in TestMain so that main_test.go
// (TestMain with goleak) stays as it is: init runs before TestMain, and the
// child exits before the testing package parses a flag or runs anything.
func init() {
	if os.Getenv(benchEchoVar) != "stdio" {
		return
	}
	err := benchEchoServer().Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench echo:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type benchEchoIn struct {
	Text string `json:"text"`
}

// benchEchoServer is the upstream under measurement, the same as
// crewlet-load's (cmd/crewlet-load/echo.go): one tool that answers its text,
// with no output type, so a call costs only what carries it.
func benchEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-echo", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answer the text given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in benchEchoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	return s
}

// benchTarget is where a benchmark's client sessions call echo.
type benchTarget struct {
	url   string
	token string
	tool  string
	tr    *http.Transport
}

const benchToken = "bench-operator-token-0001"

// newBenchEchoHTTP serves the echo upstream statelessly over streamable
// HTTP, as crewlet-load does: the revision (2026-07-28) and the SDK code path
// are then the same as on the hub's own front for a modern client.
func newBenchEchoHTTP(b *testing.B) string {
	s := benchEchoServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// newBenchTransport keeps enough idle connections for 64 sessions: the
// default 2 per host would open and close a connection on most calls.
func newBenchTransport(b *testing.B) *http.Transport {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}
	b.Cleanup(tr.CloseIdleConnections)
	return tr
}

// newBenchHub runs a hub in-process with one upstream declared by server
// (a YAML mcp_servers entry) and serves its front on a loopback port. It
// waits until the upstream's tool is listed.
func newBenchHub(b *testing.B, server, tool string) (string, *Hub) {
	doc := `units:
  - id: core
    name: Core
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
api:
  auth:
    tokens:
      - {id: bench, token: "${BENCH_TOKEN}", seat: ada}
mcp_servers:
` + server
	c, err := config.Parse([]byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	// The JSON handler at info level is what `crewlet serve` runs with, so
	// what the hub logs per call is formatted as it would be; it is written
	// to io.Discard, so the cost of the write itself is not in the number.
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := New(context.Background(), Options{
		Company: c,
		Env: func(k string) (string, bool) {
			if k == "BENCH_TOKEN" {
				return benchToken, true
			}
			return "", false
		},
		Logger: log,
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	// Cleanups run last-in first-out: the hub closes its sessions and
	// upstreams before its front stops listening.
	b.Cleanup(srv.Close)
	b.Cleanup(func() { _ = h.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := h.Catalogue().Get(tool); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the hub did not list %s within 10s", tool)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv.URL + "/operator/mcp", h
}
