package idp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

type whoamiIn struct{}

// ProtectedServer serves, on loopback, a go-sdk MCP server whose every
// request needs a bearer token this provider issued for clientID (the
// hub's client): go-oidc reads the provider's key set and checks the
// signature, issuer, audience and expiry. Its one tool, whoami, answers
// "subject=" and the subject of the token the call carried; echo_bearer
// answers "your token is " and the token itself. It answers
// 401 with the RFC 9728 metadata that names the provider, as a remote
// server that signs its users in through a company's provider does. It
// returns the server's MCP URL.
func (p *Provider) ProtectedServer(t testing.TB, clientID string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	provider, err := oidc.NewProvider(context.Background(), p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	verify := provider.Verifier(&oidc.Config{ClientID: clientID})
	verifier := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		id, err := verify.Verify(ctx, tok)
		if err == nil {
			return &auth.TokenInfo{UserID: id.Subject, Expiration: id.Expiry}, nil
		}
		if p.opaque() {
			// An opaque token says nothing itself: the provider's
			// userinfo endpoint says whose it is, or refuses it.
			info, uerr := provider.UserInfo(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok}))
			if uerr == nil {
				return &auth.TokenInfo{UserID: info.Subject, Expiration: time.Now().Add(time.Minute)}, nil
			}
		}
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Say whose token the call carries."},
		func(_ context.Context, req *mcp.CallToolRequest, _ whoamiIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "subject=" + req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	// A server that says what it was sent, as a careless or hostile one
	// may: the hub must not let its own grant reach the seat so.
	mcp.AddTool(s, &mcp.Tool{Name: "echo_bearer", Description: "Say the bearer token the call carried."},
		func(_ context.Context, req *mcp.CallToolRequest, _ whoamiIn) (*mcp.CallToolResult, any, error) {
			tok := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "your token is " + tok}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: base + "/mcp", AuthorizationServers: []string{p.Issuer}}))
	mux.Handle("/mcp", auth.RequireBearerToken(verifier, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	// A child stopped on a refused grant cannot end its session (its token
	// is refused too): the server ends what is left.
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return base + "/mcp"
}
