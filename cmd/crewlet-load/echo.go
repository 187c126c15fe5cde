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
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answer the text given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	return s
}

// echoHandler serves the echo server over streamable HTTP, stateless. Stateless
// because go-sdk v1.8.0 speaks MCP 2026-07-28 over HTTP only statelessly, and
// the hub's front answers a 2026-07-28 client with its stateless handler too:
// the direct path and both HTTP hops of the hub path then speak the same
// revision through the same SDK code, so the ratio compares like with like.
// It also keeps no per-session state, as a remote vendor behind a load
// balancer would.
func echoHandler() http.Handler {
	s := newEchoServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true})
}

func echoServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	stdio := fs.Bool("stdio", false, "serve MCP on stdin/stdout")
	addr := fs.String("http", "", "serve streamable HTTP on ADDR at /mcp (port 0 picks a free one; the address is printed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("echo-server takes flags only; %q is not one", fs.Arg(0))
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
		return serveEchoHTTP(ctx, *addr)
	default:
		return errors.New("echo-server: give exactly one of --stdio or --http ADDR")
	}
}

func serveEchoHTTP(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", echoHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
