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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests of issue 25's defects in the link to a server: each runs a real
// server (a go-sdk server over streamable HTTP or as a stdio child of the
// test binary, or the hand-written line server where the bytes on the wire
// must be ones no SDK writes) and calls it through an instance as the hub
// does (CallRaw).

// mrtrFirstRounds counts the rounds of the mrtr tool that came without
// input responses: the call as the client made it, which must reach the
// server once.
var mrtrFirstRounds atomic.Int64

// addIssue25Tools adds the tools these tests call to a go-sdk server.
func addIssue25Tools(s *mcp.Server) {
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
	mcp.AddTool(s, &mcp.Tool{Name: "ask_sampling", Description: "asks the client to sample"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
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
	addIssue25Tools(s)
	g := &rig{release: make(chan struct{}), calls: map[string]int{}}
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "answers once released"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			select {
			case <-g.release:
			case <-ctx.Done():
			}
			return nil, textOut{Text: "released"}, nil
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
	addIssue25Tools(s)
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

// Issue 25 defect 1: a result that holds "method" anywhere but at the top
// of the message (structured content, _meta, a text) is the call's answer,
// on every transport and both revisions.
func TestResultHoldingMethodIsAnswered(t *testing.T) {
	for rev, modern := range revisions {
		g := startRig(t, modern, nil)
		env := map[string]string{"UPSTREAM_ISSUE25": "1"}
		if modern {
			env["UPSTREAM_MODERN"] = "1"
		}
		specs := map[string]Resolved{
			"http":  {Name: "rig", Transport: TransportHTTP, URL: g.url},
			"stdio": testSpec(t, "go-sdk", env),
		}
		if !modern {
			// The legacy SSE transport is a session's alone.
			specs["sse"] = Resolved{Name: "rig", Transport: TransportSSE, URL: startSSERig(t)}
		}
		for transport, spec := range specs {
			t.Run(rev+"/"+transport, func(t *testing.T) {
				in := rigInstance(t, spec, modern)
				for tool, want := range map[string]string{
					"http_request": `"method":"HEAD"`,
					"meta_method":  `"method":"GET"`,
					"text_method":  `"text":"method"`,
				} {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					raw, res, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
					cancel()
					if err != nil || res != nil || !strings.Contains(string(raw), want) {
						t.Fatalf("%s: %s, %v, %v; want a result holding %s", tool, raw, res, err, want)
					}
				}
			})
		}
	}
}

// Issue 25 defect 3: a session revision's result that carries the members
// of a 2026-07-28 input request is answered as the server wrote it, and
// the call reaches the server once, over HTTP and over stdio.
func TestInputRequestOnSessionRevisionSentOnce(t *testing.T) {
	result := `{"content":[{"type":"text","text":"asked"}],"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`
	g := startRig(t, false, map[string]fault{"write": func(w http.ResponseWriter, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	}})
	t.Run("http", func(t *testing.T) {
		in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raw, _, err := in.CallRaw(ctx, "write", json.RawMessage(`{}`))
		if err != nil || string(raw) != result {
			t.Fatalf("CallRaw = %s, %v; want the result as written", raw, err)
		}
		if n := g.called("write"); n != 1 {
			t.Fatalf("the server received the call %d times", n)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		calls := filepath.Join(t.TempDir(), "calls")
		in := rigInstance(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_RAW_RESULT": result, "UPSTREAM_CALLS_FILE": calls}), false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raw, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(`{}`))
		if err != nil || string(raw) != result {
			t.Fatalf("CallRaw = %s, %v; want the result as written", raw, err)
		}
		b, _ := os.ReadFile(calls)
		if n := strings.Count(string(b), "tools/call"); n != 1 {
			t.Fatalf("the server received the call %d times", n)
		}
	})
}

// scripted is the client of a call, answering the server's requests as the
// test says.
type scripted struct {
	sample func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	elicit func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)
}

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
func (s *scripted) ProgressToken() any { return nil }

func sampled(text string) func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: text}}, nil
	}
}

// Issue 25 defect 3: a 2026-07-28 result that asks for input is the first
// round of a multi round-trip request. The client's answer goes back in a
// request that carries it; the call as the client made it reaches the
// server once.
func TestMultiRoundTripSendsTheCallOnce(t *testing.T) {
	g := startRig(t, true, nil)
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, true)
	client := &scripted{elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		if p.Message != "go ahead?" {
			return nil, fmt.Errorf("asked %q", p.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
	}}
	before := mrtrFirstRounds.Load()
	ctx, cancel := context.WithTimeout(WithDownstream(context.Background(), client), 10*time.Second)
	defer cancel()
	raw, res, err := in.CallRaw(ctx, "mrtr", json.RawMessage(`{}`))
	if err != nil || res != nil {
		t.Fatalf("CallRaw = %s, %v, %v", raw, res, err)
	}
	want := fmt.Sprintf("accept with state-1 after %d first rounds", before+1)
	if !strings.Contains(string(raw), want) {
		t.Fatalf("result %s; want %q", raw, want)
	}
	if n := g.called("mrtr"); n != 2 {
		t.Fatalf("the server received %d tools/call; want the call and the one carrying its answer", n)
	}
}

// Issue 25 defect 4: a call whose client never answers the server's
// sampling request (a client that hung up) ends at its bound all the same;
// the server's request is answered with an error, the call leaves the
// flights, and the next call's sampling reaches its own client.
func TestAbandonedSamplingEndsWithItsCall(t *testing.T) {
	g := startRig(t, false, nil)
	// Over HTTP the request comes on the call's own stream; over stdio and
	// legacy SSE on the session's one connection, through the SDK's client.
	specs := map[string]Resolved{
		"http":  {Name: "rig", Transport: TransportHTTP, URL: g.url},
		"stdio": testSpec(t, "go-sdk", map[string]string{"UPSTREAM_ISSUE25": "1"}),
		"sse":   {Name: "rig", Transport: TransportSSE, URL: startSSERig(t)},
	}
	for transport, spec := range specs {
		t.Run(transport, func(t *testing.T) { abandonSampling(t, rigInstance(t, spec, false)) })
	}
}

func abandonSampling(t *testing.T, in *Instance) {
	asked := make(chan struct{}, 1)
	gone := make(chan struct{})
	t.Cleanup(func() { close(gone) })
	// A client that hung up: it never answers, and heeds no context.
	deaf := &scripted{sample: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		asked <- struct{}{}
		<-gone
		return nil, errors.New("gone")
	}}
	ctx, cancel := context.WithTimeout(WithDownstream(context.Background(), deaf), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := in.CallRaw(ctx, "ask_sampling", json.RawMessage(`{}`))
		done <- err
	}()
	<-asked
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the abandoned call answered %v; want its bound's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call outlived its bound by 8 s while its server's request waited on a client that is gone")
	}
	in.flights.mu.Lock()
	left := len(in.flights.list)
	in.flights.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d flights left after the call ended", left)
	}
	ctx2, cancel2 := context.WithTimeout(WithDownstream(context.Background(), &scripted{sample: sampled("hi")}), 10*time.Second)
	defer cancel2()
	raw, _, err := in.CallRaw(ctx2, "ask_sampling", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(string(raw), "sampled: hi") {
		t.Fatalf("the next call: %s, %v", raw, err)
	}
}

// Issue 25 defect 4: a sampling request that comes on a call's own
// response stream is that call's, and reaches its client though another
// call to the server is in flight.
func TestRequestOnOwnStreamReachesItsClient(t *testing.T) {
	g := startRig(t, false, nil)
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
	other := &scripted{sample: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return nil, errors.New("asked the client of another call")
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() {
		_, _, err := in.CallRaw(WithDownstream(ctx, other), "hold", json.RawMessage(`{}`))
		held <- err
	}()
	// The hold call is in flight once the server has it.
	for g.called("hold") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	raw, _, err := in.CallRaw(WithDownstream(ctx, &scripted{sample: sampled("mine")}), "ask_sampling", json.RawMessage(`{}`))
	close(g.release)
	if err != nil || !strings.Contains(string(raw), "sampled: mine") {
		t.Fatalf("sampling beside another call: %s, %v", raw, err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the held call: %v", err)
	}
}

// deepResult is a result nested levels deep in its structured content.
func deepResult(levels int) string {
	return `{"content":[{"type":"text","text":"deep"}],"structuredContent":{"v":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}}`
}

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

// Issue 25 defect 5: an answer the hub cannot read (invalid UTF-8, nesting
// past the SDK's bound) is refused as the server's failure, not as a
// condition a retry clears, over HTTP (a JSON body and an event stream, on
// both revisions) and over stdio, each saying what was wrong with it; the
// server's session lives on.
func TestUnreadableAnswerIsTheServers(t *testing.T) {
	answers := []struct {
		result, why string
	}{
		{`{"content":[{"type":"text","text":"caf` + "\xff" + `"}]}`, "bytes that are not valid UTF-8"},
		{deepResult(1000), "nested 1003 levels deep"},
	}
	write := func(sse bool, result string) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			msg := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: "+msg+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, msg)
		}
	}
	for rev, modern := range revisions {
		faults := map[string]fault{}
		tools := map[string]string{}
		for i, a := range answers {
			for _, sse := range []bool{false, true} {
				name := fmt.Sprintf("bad%d_sse_%v", i, sse)
				faults[name], tools[name] = write(sse, a.result), a.why
			}
		}
		g := startRig(t, modern, faults)
		t.Run(rev+"/http", func(t *testing.T) {
			in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, modern)
			for tool, why := range tools {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
				cancel()
				wantUnreadable(t, err, why)
			}
			if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
				t.Fatalf("after unreadable answers: %q %v", text, err)
			}
		})
	}
	for _, a := range answers {
		t.Run("stdio/"+a.why, func(t *testing.T) {
			in := rigInstance(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_RAW_RESULT": a.result}), false)
			pid := in.childPID()
			// Twice: an instance whose session had ended would answer the
			// second call as down (its restart is an hour away).
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(`{}`))
				cancel()
				wantUnreadable(t, err, a.why)
			}
			if got := in.childPID(); got != pid {
				t.Fatalf("the child was restarted (pid %d, then %d)", pid, got)
			}
		})
	}
}

// Issue 25 defect 8: one message past the bound (a JSON body, one event of
// a stream) is refused as such, not gathered without end.
func TestAnswerPastTheBoundIsRefused(t *testing.T) {
	big := func(sse bool) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			head := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				head = "data: " + head
			} else {
				w.Header().Set("Content-Type", "application/json")
			}
			_, _ = io.WriteString(w, head)
			chunk := strings.Repeat("x", 1<<20)
			for range maxMessage>>20 + 1 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}}`)
			if sse {
				_, _ = io.WriteString(w, "\n\n")
			}
		}
	}
	g := startRig(t, false, map[string]fault{"big_json": big(false), "big_event": big(true)})
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
	for _, tool := range []string{"big_json", "big_event"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
		cancel()
		wantUnreadable(t, err, "larger than the 16 MiB")
	}
	if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
		t.Fatalf("after answers past the bound: %q %v", text, err)
	}
}

// logSink is a client that notes the log lines it is sent.
type logSink struct {
	scripted
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Log(_ context.Context, p *mcp.LoggingMessageParams) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(p.Data))
	return nil
}

// Issue 25 defect 5: what the server says on a call's stream before an
// answer the hub cannot read (nested too deep, past the bound) reaches the
// call's client, all of it and in order, before the call is refused; the
// SDK's client, which takes such an answer for a broken connection, would
// drop what it had read and not yet handed over.
func TestLogLinesBeforeAnUnreadableAnswerArrive(t *testing.T) {
	const lines = 8
	stream := func(answer func(w io.Writer, id json.RawMessage)) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range lines {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"line %d\"}}\n\n", i)
			}
			answer(w, id)
		}
	}
	deep := stream(func(w io.Writer, id json.RawMessage) {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, deepResult(1000))
	})
	big := stream(func(w io.Writer, id json.RawMessage) {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"%s\"}]}}\n\n",
			id, strings.Repeat("x", maxMessage))
	})
	g := startRig(t, false, map[string]fault{"deep": deep, "big": big})
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
	for tool, why := range map[string]string{"deep": "nested 1003 levels deep", "big": "larger than the 16 MiB"} {
		for round := range 10 {
			sink := &logSink{}
			ctx, cancel := context.WithTimeout(WithDownstream(context.Background(), sink), 10*time.Second)
			_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
			cancel()
			wantUnreadable(t, err, why)
			sink.mu.Lock()
			got := strings.Join(sink.lines, ",")
			sink.mu.Unlock()
			if want := "line 0,line 1,line 2,line 3,line 4,line 5,line 6,line 7"; got != want {
				t.Fatalf("%s, round %d: the client got %q before the refusal; want %q", tool, round, got, want)
			}
			if tool == "big" {
				break
			}
		}
	}
}

// cutAnswer is a fault that writes the first half of a call's answer (a
// JSON body, or an event of a stream) and closes the connection under the
// rest, as a proxy or a dropped network leaves it: only that call's
// connection breaks, the server and its session go on.
func cutAnswer(sse bool) fault {
	return func(w http.ResponseWriter, id json.RawMessage) {
		msg := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"the whole answer"}]}}`
		part := msg[:len(msg)/2]
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			part = "event: message\ndata: " + part
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = io.WriteString(w, part)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	}
}

// Issue 25 (FuzzTransparency, stop 32's first): a streamable HTTP server's
// answer cut mid-way (a JSON body, an event stream with no event id to
// resume from) broke that call's own connection, not the session: the
// call is refused at once as cut off (it reached the server, so it may
// have run), never after waiting for the session's end that does not come
// and saying it ended; the session goes on and the next call is answered.
func TestCutHTTPAnswerIsNotTheSessionsEnd(t *testing.T) {
	for rev, modern := range revisions {
		g := startRig(t, modern, map[string]fault{"cut_json": cutAnswer(false), "cut_event": cutAnswer(true)})
		t.Run(rev, func(t *testing.T) {
			in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, modern)
			since := in.Status().Since
			for _, tool := range []string{"cut_json", "cut_event"} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
				took := time.Since(start)
				cancel()
				var cut *CutError
				var down *DownError
				if !errors.As(err, &cut) || cut.Server != "rig" || errors.As(err, &down) {
					t.Fatalf("%s answered %v (%T); want the answer cut off", tool, err, err)
				}
				// The session's end is waited for up to 2 s (waitRecorded);
				// a cut answer waits for nothing.
				if took >= 2*time.Second {
					t.Fatalf("%s was refused after %s: it waited for a session's end", tool, took)
				}
				if n := g.called(tool); n != 1 {
					t.Fatalf("%s reached the server %d times; want once", tool, n)
				}
			}
			if st := in.Status(); st.State != StateRunning || !st.Since.Equal(since) {
				t.Fatalf("after cut answers: %s since %s (was up since %s)", st.State, st.Since, since)
			}
			if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
				t.Fatalf("after cut answers: %q %v", text, err)
			}
		})
	}
}

// Issue 25 defect 5 (FuzzTransparency, stop 32's third finding): a stdio
// server's answer whose one line is past the 16 MiB bound is refused as
// the server's unreadable answer, past the bound, the same words as over
// HTTP, and never as retryable; the child is not taken down, since the
// line is read to its end and the next begins in step, whether the id
// comes before the result or after it. An answer just under the bound is
// answered whole.
func TestStdioAnswerPastTheBoundIsUnreadable(t *testing.T) {
	for _, order := range []string{"id-first", "id-last"} {
		t.Run(order, func(t *testing.T) {
			in := rigInstance(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_SIZED": order}), false)
			pid := in.childPID()
			call := func(size int) (json.RawMessage, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				raw, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(fmt.Sprintf(`{"bytes":%d}`, size)))
				return raw, err
			}
			// Just past the bound, and well past it (the rest of the line
			// read in pieces after the bound): an instance whose session
			// had ended would answer the second call as down (its restart
			// is an hour away).
			for _, size := range []int{maxMessage, maxMessage + 1<<20} {
				_, err := call(size)
				wantUnreadable(t, err, "larger than the 16 MiB")
			}
			// The response around the text is under a hundred bytes.
			raw, err := call(maxMessage - 100)
			if err != nil || len(raw) < maxMessage-100 {
				t.Fatalf("an answer just under the bound: %d bytes, %v", len(raw), err)
			}
			if got := in.childPID(); got != pid {
				t.Fatalf("the child was restarted (pid %d, then %d)", pid, got)
			}
		})
	}
}
