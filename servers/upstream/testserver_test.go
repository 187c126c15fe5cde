package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The test binary doubles as the upstream servers these tests supervise:
// real processes speaking real MCP over stdio, which can crash, fork and
// misbehave on demand.
func TestMain(m *testing.M) {
	switch os.Getenv("UPSTREAM_TEST_SERVER") {
	case "go-sdk":
		serveGoSDK()
		return
	case "legacy":
		serveLegacy()
		return
	case "mute":
		// A server stuck before it speaks (a package still downloading):
		// it reads what it is sent, answers nothing, and exits cleanly
		// when its input ends.
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	case "exit-at-start":
		fmt.Fprintln(os.Stderr, "fatal: API token rejected (test)")
		os.Exit(4)
	}
	goleak.VerifyTestMain(m)
}

type noArgs struct{}

type textOut struct {
	Text string `json:"text"`
}

func serveGoSDK() {
	var opts *mcp.ServerOptions
	if os.Getenv("UPSTREAM_MODERN") != "" {
		// A server of 2026-07-28 alone: the hub speaks that revision to it.
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "0"}, opts)
	if os.Getenv("UPSTREAM_RIG_TOOLS") != "" {
		addRigTools(s)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: in.Text}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "the process environment"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: strings.Join(os.Environ(), "\n")}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exit mid-call"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			fmt.Fprintln(os.Stderr, "panic: crash requested (test)")
			os.Exit(3)
			return nil, textOut{}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang_up", Description: "close stdout mid-call and run on"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			fmt.Fprintln(os.Stderr, "hanging up, running on")
			os.Stdout.Close()
			select {}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "start a grandchild that outlives nothing"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			cmd := exec.Command("sleep", "300")
			if os.Getenv("UPSTREAM_SETSID") != "" {
				// A grandchild that leaves the child's process group
				// and session, as a daemon does.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			}
			if err := cmd.Start(); err != nil {
				return nil, textOut{}, err
			}
			return nil, textOut{Text: fmt.Sprint(cmd.Process.Pid)}, nil
		})
	// With UPSTREAM_CHATTY set, the server offers a tool that reports
	// progress three times before it answers.
	if os.Getenv("UPSTREAM_CHATTY") != "" {
		mcp.AddTool(s, &mcp.Tool{Name: "chatty", Description: "reports progress three times, then answers"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
				if tok := req.Params.GetProgressToken(); tok != nil {
					for i := 1; i <= 3; i++ {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
					}
				}
				return nil, textOut{Text: "said it all"}, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "chatty_crash", Description: "reports progress three times, then dies without answering"},
			func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
				if tok := req.Params.GetProgressToken(); tok != nil {
					for i := 1; i <= 3; i++ {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
					}
				}
				os.Exit(3)
				return nil, textOut{}, nil
			})
	}
	// With UPSTREAM_SHOUT set, the server offers a tool that writes one
	// stderr line of the given size, then another line, then answers.
	if os.Getenv("UPSTREAM_SHOUT") != "" {
		mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "one very long stderr line"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
				Bytes int `json:"bytes"`
			}) (*mcp.CallToolResult, textOut, error) {
				if _, err := fmt.Fprintln(os.Stderr, strings.Repeat("x", in.Bytes)); err != nil {
					return nil, textOut{}, err
				}
				fmt.Fprintln(os.Stderr, "still here after shouting")
				return nil, textOut{Text: "shouted"}, nil
			})
	}
	// With UPSTREAM_EXTRA_TOOL naming a file that exists, the server lists
	// one more tool: a restart can come back with a different list.
	if f := os.Getenv("UPSTREAM_EXTRA_TOOL"); f != "" {
		if _, err := os.Stat(f); err == nil {
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "appears after a restart"},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
					return nil, textOut{Text: "extra"}, nil
				})
		}
	}
	fmt.Fprintln(os.Stderr, "test upstream ready")
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// serveLegacy is a hand-written line-delimited JSON-RPC server of the
// 2025-06-18 era that, like some old servers, never answers a method it does
// not know, so a server/discover probe gets no reply at all.
//
// With UPSTREAM_TEST_WEDGED set, it answers a tools/call only once another
// line arrives, as a server built with Go 1.26 or later sometimes does: the
// request read, the answer queued, and nothing running until more input
// wakes the thread parked reading stdin.
func serveLegacy() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	// With UPSTREAM_RAW_RESULT set, a tools/call is answered with that
	// text as its result, byte for byte, however malformed; with
	// UPSTREAM_CALLS_FILE set, each tools/call is noted there first.
	rawResult, rawSet := os.LookupEnv("UPSTREAM_RAW_RESULT")
	// With UPSTREAM_RAW_ONCE set too, only the first tools/call is
	// answered so, the next ones as usual.
	rawOnce := os.Getenv("UPSTREAM_RAW_ONCE") != ""
	callsFile := os.Getenv("UPSTREAM_CALLS_FILE")
	wedged := os.Getenv("UPSTREAM_TEST_WEDGED") != ""
	// With UPSTREAM_SIZED set, a tools/call is answered with one text of
	// as many bytes as its argument "bytes" says, in one line; with
	// UPSTREAM_SIZED=id-last, the id is written after the result.
	sized := os.Getenv("UPSTREAM_SIZED")
	var held []byte
	for in.Scan() {
		if held != nil {
			_, _ = os.Stdout.Write(held)
			held = nil
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "legacy", "version": "0"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "old_tool", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			if callsFile != "" {
				f, err := os.OpenFile(callsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					_, _ = f.WriteString("tools/call\n")
					f.Close()
				}
			}
			if sized != "" {
				var p struct {
					Params struct {
						Arguments struct {
							Bytes int `json:"bytes"`
						} `json:"arguments"`
					} `json:"params"`
				}
				_ = json.Unmarshal(in.Bytes(), &p)
				result := `"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", p.Params.Arguments.Bytes) + `"}]}`
				id := `"id":` + string(req.ID)
				line := `{"jsonrpc":"2.0",` + id + "," + result + "}\n"
				if sized == "id-last" {
					line = `{"jsonrpc":"2.0",` + result + "," + id + "}\n"
				}
				_, _ = io.WriteString(os.Stdout, line)
				continue
			}
			if rawSet {
				line := append([]byte(`{"jsonrpc":"2.0","id":`), req.ID...)
				line = append(append(append(line, `,"result":`...), rawResult...), "}\n"...)
				_, _ = os.Stdout.Write(line)
				rawSet = !rawOnce
				continue
			}
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "legacy answer"}}}
			if wedged {
				held, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
				held = append(held, '\n')
				continue
			}
		case "ping":
			result = map[string]any{}
		default:
			fmt.Fprintln(os.Stderr, "ignoring", req.Method)
			continue
		}
		_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
}

// testSpec is a stdio spec that runs this test binary as the given server.
func testSpec(t testing.TB, mode string, extraEnv map[string]string) Resolved {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"UPSTREAM_TEST_SERVER": mode}
	for k, v := range extraEnv {
		env[k] = v
	}
	return Resolved{Name: "test-" + mode, Transport: TransportStdio, Command: exe, Env: env}
}
