package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkProxyServer is the second reference of the forward section: the
// plainest MCP proxy the go-sdk makes, with nothing of the hub in it. It
// lists the upstream's tools once, then serves each tools/call by calling
// the upstream through one go-sdk client session and answering the result
// the client decoded. Its CPU per call is what an MCP gateway built on the
// SDK alone spends, to read the hub's against.
func sdkProxyServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sdk-proxy", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "serve streamable HTTP at /mcp on ADDR (port 0 picks a free one; the address is printed)")
	to := fs.String("to", "", "the upstream's MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *to == "" {
		return fmt.Errorf("sdk-proxy takes --to URL and --listen ADDR only")
	}
	// The link speaks the revision the hub's link to the echo speaks, so
	// the echo's cost per call is the same behind both.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crewlet-load-sdk-proxy", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: *to}, &mcp.ClientSessionOptions{ProtocolVersion: rev2025})
	if err != nil {
		return fmt.Errorf("sdk-proxy: connecting to %s: %w", *to, err)
	}
	defer cs.Close()
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-load-sdk-proxy", Version: "0"}, nil)
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("sdk-proxy: listing %s: %w", *to, err)
		}
		s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	return serveHTTP(ctx, *addr, mux)
}
