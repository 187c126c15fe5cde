package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoIn is the echo tool's one argument.
type echoIn struct {
	Text string `json:"text"`
}

// newEchoServer is the upstream under measurement: one tool that answers its
// text as text content. It does no work of its own, so what a call costs is
// what the transports and SDKs on its way cost. No output type is declared
// (Out is any), so no structured content or output validation is added to
// what is measured.
func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-load-echo", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: echoTool, Description: "Answer the text given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	return s
}

// echoHandler serves the echo server over streamable HTTP at two paths:
// statelessly at /mcp, which is how go-sdk v1.8.0 speaks MCP 2026-07-28
// over HTTP (and what the hub's upstream link uses, as a vendor's server
// behind a load balancer would be reached), and with sessions at
// /session/mcp, where a 2025-11-25 client gets what it gets from the hub's
// front: a stateful session with its event stream. The direct baseline of
// each revision calls the path that revision is served on.
func echoHandler() http.Handler {
	s := newEchoServer()
	get := func(*http.Request) *mcp.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true}))
	mux.Handle("/session/mcp", mcp.NewStreamableHTTPHandler(get, nil))
	return mux
}

func echoServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	stdio := fs.Bool("stdio", false, "serve MCP on stdin/stdout")
	addr := fs.String("http", "", "serve streamable HTTP on ADDR at /mcp, stateless, and /session/mcp, with sessions (port 0 picks a free one; the address is printed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *stdio && *addr == "":
		// Ends when the client closes stdin (the hub stopping), or on a
		// signal.
		err := newEchoServer().Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	case *addr != "" && !*stdio:
		return serveHTTP(ctx, *addr, echoHandler())
	default:
		return errors.New("echo-server: give exactly one of --stdio or --http ADDR")
	}
}

// serveHTTP serves h on addr until ctx ends, first printing the address it
// listens on.
func serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// The parent reads this one line to learn the port.
	fmt.Printf("listening %s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shut)
	}
}
