// Package hubtest is the test kit of the hub layer: a bearer-token
// transport, a client connected to a hub's operator endpoint, a company
// document built in a few lines, and a result's text. The hub's own tests
// and the end-to-end suites use it, so each helper exists once.
//
// It imports the hub's config package but never the hub itself, so the
// hub's internal tests can use it too.
package hubtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crewlet/hub/servers/serverstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bearer sends a token as the Authorization bearer on every request, as an
// operator's client does.
type Bearer struct {
	Token string
	// Base carries the request; http.DefaultTransport if nil.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper. It clones the request, as the
// interface requires of a transport that changes one.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	base := b.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// Client is an HTTP client presenting token on every request.
func Client(token string) *http.Client {
	return &http.Client{Transport: Bearer{Token: token}}
}

// Serve serves h on a loopback port for the test's life and returns its
// base URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Connect opens a go-sdk client session to an MCP endpoint with a bearer
// token, speaking version ("" lets the client negotiate). The session is
// closed when the test ends.
func Connect(t testing.TB, endpoint, token, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := Dial(t, endpoint, token, version, nil)
	if err != nil {
		t.Fatalf("connect to %s (%q): %v", endpoint, version, err)
	}
	return cs
}

// Dial is Connect for a test that expects the connection to fail, or
// that needs client options (notification handlers).
func Dial(t testing.TB, endpoint, token, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	return DialClient(t, endpoint, Client(token), version, opts)
}

// DialClient is Dial over an HTTP client of the test's own (one that
// trusts a test CA, say), which presents the credential itself.
func DialClient(t testing.TB, endpoint string, hc *http.Client, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hubtest", Version: "0"}, opts).
		Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// Text joins a result's text contents, as a model reading it would.
var Text = serverstest.Text

// Upstream serves a go-sdk MCP server with the given tools over streamable
// HTTP on a loopback port, as a third-party server the hub dials. Each tool
// answers its own name and the arguments it got. It returns the endpoint.
func Upstream(t testing.TB, tools ...*mcp.Tool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hubtest-upstream", Version: "0"}, nil)
	for _, tool := range tools {
		if tool.InputSchema == nil {
			tool.InputSchema = map[string]any{"type": "object"}
		}
		name := tool.Name
		s.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + string(req.Params.Arguments)}}}, nil
		})
	}
	return ServeMCP(t, s, nil) + "/"
}

// ServeMCP serves s over streamable HTTP on a loopback port for the test's
// life, with opts (nil: the SDK's defaults, sessions kept), and returns its
// URL. Its sessions are closed before the server, so no stream holds the
// server's close.
func ServeMCP(t testing.TB, s *mcp.Server, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts))
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
		srv.Close()
	})
	return srv.URL
}
