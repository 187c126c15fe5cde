//lint:file-ignore SA1019 the tests play clients and servers of the session revisions, which still send and take sampling.

package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests of what a server's answers and requests do on the link (issue
// 25's defects) each run a real server (a go-sdk server over streamable
// HTTP or as a stdio child of the test binary, or the hand-written line
// server where the bytes on the wire must be ones no SDK writes) and call
// it through an instance as the hub does (CallRaw). This file is what they
// share: the rig and its tools, a scripted client, the check of an answer
// the hub could not read.

// mrtrFirstRounds counts the rounds of the mrtr tool that came without
// input responses: the call as the client made it, which must reach the
// server once.
var mrtrFirstRounds atomic.Int64

// addRigTools adds to a go-sdk server the tools the rig's tests call:
// results and requests a link must carry as they are.
func addRigTools(s *mcp.Server) {
	type request struct {
		Method string `json:"method"`
		URL    string `json:"url"`
		Status int    `json:"status"`
	}
	// A tool that reports an HTTP request: "method" is a member of its
	// result, as it is of any HTTP-request tool's.
	mcp.AddTool(s, &mcp.Tool{Name: "http_request", Description: "reports an HTTP request"},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, request, error) {
			return nil, request{Method: "HEAD", URL: "https://example.com/", Status: 200}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "meta_method", Description: "a result whose _meta has a method"},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Meta: mcp.Meta{"method": "GET"}, Content: []mcp.Content{&mcp.TextContent{Text: "with meta"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "text_method", Description: "a result whose text is method"},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "method"}}}, nil, nil
		})
	// A tool that asks its caller's client for a sampling, on the call's
	// own stream, and answers what it got.
	// Over stdio the request names its call by the call's progress token
	// in its _meta, where the call has one.
	mcp.AddTool(s, &mcp.Tool{Name: "ask_sampling", Description: "asks the client to sample"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			var meta mcp.Meta
			if tok := req.Params.GetProgressToken(); tok != nil {
				meta = mcp.Meta{"progressToken": tok}
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{Meta: meta, MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil
			}
			text, _ := res.Content.(*mcp.TextContent)
			if text == nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampled no text"}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled: " + text.Text}}}, nil, nil
		})
	// A tool whose server writes a log line that names no request (as a
	// job of another caller's writes one late), then answers.
	mcp.AddTool(s, &mcp.Tool{Name: "stray_note", Description: "logs a line that names no request"},
		func(ctx context.Context, req *mcp.CallToolRequest, in textOut) (*mcp.CallToolResult, textOut, error) {
			err := req.Session.Log(context.Background(), &mcp.LoggingMessageParams{Level: "info", Data: in.Text})
			return nil, textOut{Text: "noted"}, err
		})
	// A tool whose log line names its call by the call's progress token,
	// in its _meta, and not by the call's stream.
	mcp.AddTool(s, &mcp.Tool{Name: "token_note", Description: "logs a line naming its call by progress token"},
		func(ctx context.Context, req *mcp.CallToolRequest, in textOut) (*mcp.CallToolResult, textOut, error) {
			p := &mcp.LoggingMessageParams{Level: "info", Data: in.Text}
			if tok := req.Params.GetProgressToken(); tok != nil {
				p.Meta = mcp.Meta{"progressToken": tok}
			}
			err := req.Session.Log(context.Background(), p)
			return nil, textOut{Text: "noted"}, err
		})
	// A tool that answers only once its call is cancelled: a call held
	// in flight beside another.
	mcp.AddTool(s, &mcp.Tool{Name: "until_cancelled", Description: "answers once cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			<-ctx.Done()
			return nil, textOut{Text: "cancelled"}, nil
		})
	// A tool whose arguments travel in headers too (x-mcp-header,
	// SEP-2243), which a 2026-07-28 server checks against the body; it
	// answers the arguments it got.
	s.AddTool(&mcp.Tool{Name: "by_region", Description: "answers its arguments", InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			"count":  map[string]any{"type": "integer", "x-mcp-header": "Count"},
			"opts": map[string]any{"type": "object", "properties": map[string]any{
				"tenant": map[string]any{"type": "string", "x-mcp-header": "Tenant"}}},
		}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	// A 2026-07-28 multi round-trip tool: it asks for a confirmation in
	// its result, and acts once it has one.
	mcp.AddTool(s, &mcp.Tool{Name: "mrtr", Description: "asks for a confirmation, then acts"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			if req.Params.InputResponses == nil {
				mrtrFirstRounds.Add(1)
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "go ahead?",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}},
					RequestState: "state-1",
				}, nil, nil
			}
			e, _ := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
			if e == nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no confirmation"}}}, nil, nil
			}
			text := fmt.Sprintf("%s with %s after %d first rounds", e.Action, req.Params.RequestState, mrtrFirstRounds.Load())
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
}

// rig is a go-sdk server over streamable HTTP, of the session revisions or
// of 2026-07-28 alone, that counts the tools/call requests it receives per
// tool, and whose answer to a tool named in faults is written by the test
// instead, byte for byte: a fault on the wire no SDK server writes.
type rig struct {
	url     string
	release chan struct{} // ends the hold tool's calls
	mu      sync.Mutex
	calls   map[string]int
}

type fault func(w http.ResponseWriter, id json.RawMessage)

func startRig(t *testing.T, modern bool, faults map[string]fault) *rig {
	t.Helper()
	var opts *mcp.ServerOptions
	if modern {
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "rig", Version: "0"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: in.Text}, nil
		})
	addRigTools(s)
	g := &rig{release: make(chan struct{}), calls: map[string]int{}}
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "answers once released"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			select {
			case <-g.release:
			case <-ctx.Done():
			}
			return nil, textOut{Text: "released"}, nil
		})
	// stray_note, answering once released: over HTTP its line comes on
	// the session's own stream, and the call is still in flight when it
	// arrives.
	mcp.AddTool(s, &mcp.Tool{Name: "stray_note_held", Description: "logs a line that names no request, answers once released"},
		func(ctx context.Context, req *mcp.CallToolRequest, in textOut) (*mcp.CallToolResult, textOut, error) {
			if err := req.Session.Log(context.Background(), &mcp.LoggingMessageParams{Level: "info", Data: in.Text}); err != nil {
				return nil, textOut{}, err
			}
			select {
			case <-g.release:
			case <-ctx.Done():
			}
			return nil, textOut{Text: "noted"}, nil
		})
	// 2026-07-28 has no sessions: the SDK serves it statelessly only.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: modern})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "http://" + ln.Addr().String() + "/"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				g.mu.Lock()
				g.calls[msg.Params.Name]++
				g.mu.Unlock()
				if f := faults[msg.Params.Name]; f != nil {
					f(w, msg.ID)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return g
}

// startSSERig serves the tools of these tests over the legacy SSE
// transport, and answers its URL.
func startSSERig(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "rig-sse", Version: "0"}, nil)
	addRigTools(s)
	return serveMCP(t, s, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

func (g *rig) called(tool string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[tool]
}

// rigInstance starts an instance on the rig and checks its calls have a
// link on the revision asked for.
func rigInstance(t *testing.T, spec Resolved, modern bool) *Instance {
	t.Helper()
	in, _ := startTest(t, spec, func(o *Options) { o.Schedule = &Schedule{Base: time.Hour, Jitter: -1} })
	waitState(t, in, StateRunning, 10*time.Second)
	in.mu.Lock()
	linked, version := in.calls != nil, in.callSetup.version
	in.mu.Unlock()
	if !linked || (version >= modernVersion) != modern {
		t.Fatalf("link %v on revision %q; want it on modern=%v", linked, version, modern)
	}
	return in
}

// revisions names the protocol revisions the hub speaks to a server.
var revisions = map[string]bool{"2025-11-25": false, "2026-07-28": true}

// scripted is the client of a call, answering the server's requests as the
// test says.
type scripted struct {
	sample func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
	token  any    // the client's progress token, nil for none
	caller string // who the call is for
}

func (s *scripted) Caller() string { return s.caller }

func (s *scripted) Log(context.Context, *mcp.LoggingMessageParams) error            { return nil }
func (s *scripted) Progress(context.Context, *mcp.ProgressNotificationParams) error { return nil }
func (s *scripted) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if s.sample == nil {
		return nil, errors.New("no sampling here")
	}
	return s.sample(ctx, p)
}
func (s *scripted) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if s.elicit == nil {
		return nil, errors.New("no elicitation here")
	}
	return s.elicit(ctx, p)
}
func (s *scripted) ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
}
func (s *scripted) ProgressToken() any { return s.token }

// wantUnreadable checks a call refused as the server's unreadable answer:
// the server's own failure (a JSON-RPC error), never the server being down
// or a condition to wait out.
func wantUnreadable(t *testing.T, err error, why string) {
	t.Helper()
	var unreadable *UnreadableError
	var wire *jsonrpc.Error
	var down *DownError
	if !errors.As(err, &unreadable) || !errors.As(err, &wire) || errors.As(err, &down) {
		t.Fatalf("answered %v (%T); want the server's unreadable answer", err, err)
	}
	if !strings.Contains(wire.Message, "could not read") || !strings.Contains(wire.Message, why) || !strings.Contains(wire.Message, "may have taken effect") {
		t.Fatalf("refusal %q; want it to say the hub could not read %s", wire.Message, why)
	}
}
