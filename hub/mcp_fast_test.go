//lint:file-ignore SA1019 the test plays clients and servers of the session revisions, which still use logging, sampling and roots.

package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path must answer exactly what the SDK path answers. Each call
// below is made on both protocol revisions, once through the fast path and
// once with it turned off (the SDK serving the call as it did before), and
// the two answers are compared: results (refusals and sanitised results
// included), the progress and log lines the client saw, what sampling,
// elicitation and roots came back with, and a cancelled call's cancellation
// reaching the server.

// diffUpstream is a third-party server whose tools exercise what a call can
// carry. cancelled receives the name of a call the server saw cancelled.
func diffUpstream(t *testing.T, stateless bool, cancelled chan<- string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "diff-upstream", Version: "0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
	})
	add := func(name string, h func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, h)
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add("echo", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: "args " + string(req.Params.Arguments), Meta: mcp.Meta{"k": "v"}}},
			StructuredContent: map[string]any{"n": 12, "list": []any{"a", true, nil, 1.5}, "nested": map[string]any{"s": "<b>&</b>"}},
			Meta:              mcp.Meta{"trace": "t-1"},
		}, nil
	})
	add("dirty", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: "\x1b[31mred\x1b[0m token=abc Authorization: Bearer abcdefgh12345 hunter2hunter2"}},
			StructuredContent: map[string]any{"pw": "password=x", "ctl": "a\u009bb"},
		}, nil
	})
	add("binary", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("a\x00b"), nil
	})
	add("fails", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it broke: token=abc"}}}, nil
	})
	add("image", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"}}}, nil
	})
	add("protocol_error", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("no such thing")
	})
	add("progress", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: "step"})
			}
		}
		return text("done"), nil
	})
	add("log", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "quiet"})
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "loud token=abc"})
		return text("logged"), nil
	})
	add("sample", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return text("sampling failed: " + err.Error()), nil
		}
		return text("sampled: " + res.Model), nil
	})
	add("elicit", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return text("elicitation failed: " + err.Error()), nil
		}
		b, _ := json.Marshal(res.Content)
		return text("elicited: " + res.Action + " " + string(b)), nil
	})
	add("roots", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return text("roots failed: " + err.Error()), nil
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return text("roots: " + strings.Join(uris, ",")), nil
	})
	add("slow", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			cancelled <- "slow"
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return text("too late"), nil
		}
	})
	return hubtest.ServeMCP(t, s, &mcp.StreamableHTTPOptions{Stateless: stateless})
}

// seen is what a client saw besides results.
type seen struct {
	mu    sync.Mutex
	lines []string
}

func (s *seen) add(format string, args ...any) {
	s.mu.Lock()
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// await takes what the client saw once it holds n lines, failing the
// test if that many never come.
func (s *seen) await(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		have := len(s.lines)
		s.mu.Unlock()
		if have >= n {
			return s.take()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client saw %d notifications, want %d", have, n)
		}
		time.Sleep(5 * time.Millisecond) // polling what was seen, with a deadline
	}
}

func (s *seen) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.lines
	s.lines = nil
	sort.Strings(out)
	return out
}

func diffClient(t *testing.T, url, version string, saw *seen) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "diff", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m-" + fmt.Sprint(len(req.Params.Messages)), Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			saw.add("progress %v %v/%v %s", req.Params.ProgressToken, req.Params.Progress, req.Params.Total, req.Params.Message)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			saw.add("log %s %v", req.Params.Level, req.Params.Data)
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///srv/alpha", Name: "alpha"})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hubtest.Client("ada-token-123456")},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil && version != "2026-07-28" {
		t.Fatal(err)
	}
	return cs
}

func TestFastPathAnswersWhatTheSDKPathAnswers(t *testing.T) {
	cancelled := make(chan string, 8)
	session := diffUpstream(t, false, cancelled)
	stateless := diffUpstream(t, true, cancelled)
	th := newTestHub(t, withServers(t,
		fmt.Sprintf(`{name: a, url: %q, tool_prefix: a_}`, session),
		fmt.Sprintf(`{name: b, url: %q, tool_prefix: b_}`, stateless)))
	waitTool(t, th, "a_echo", "b_echo")

	type call struct {
		name  string
		args  map[string]any
		token any
	}
	calls := []call{
		{name: "echo", args: map[string]any{"text": "hello"}},
		{name: "echo", args: map[string]any{"emit": `\x1b[1mbold\x1b[0m token=abc`}},
		{name: "echo", args: map[string]any{"fail": "conflict"}},
		{name: "echo", args: map[string]any{"fail": "internal"}},
		{name: "echo", args: map[string]any{"text": "a\u0007b"}},
		{name: "nothing_called_this"},
	}
	for _, up := range []string{"a_", "b_"} {
		for _, tool := range []string{"echo", "dirty", "binary", "fails", "image", "protocol_error", "log"} {
			calls = append(calls, call{name: up + tool, args: map[string]any{"x": 1}})
		}
		calls = append(calls, call{name: up + "echo", args: map[string]any{"bad": "a\u0001b"}})
		calls = append(calls, call{name: up + "progress", args: map[string]any{}, token: "tok-7"})
		calls = append(calls, call{name: up + "progress", args: map[string]any{}, token: 42})
	}
	// Requests of the client reach it only from a server with sessions.
	for _, tool := range []string{"sample", "elicit", "roots"} {
		calls = append(calls, call{name: "a_" + tool, args: map[string]any{}})
	}

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		// notes is how many notifications the client sees for a call: two
		// steps of progress when it asks for them, and the warning of the
		// log tool where the client set a level (2026-07-28 sets none).
		notes := func(name string, token bool) int {
			switch {
			case strings.HasSuffix(name, "_progress") && token:
				return 2
			case strings.HasSuffix(name, "_log") && version == "2025-11-25":
				return 1
			}
			return 0
		}
		t.Run(version, func(t *testing.T) {
			saw := &seen{}
			cs := diffClient(t, th.url+"/operator/mcp", version, saw)
			for _, c := range calls {
				answer := func(fast bool) (string, []string) {
					th.operator.noFast.Store(!fast)
					defer th.operator.noFast.Store(false)
					params := &mcp.CallToolParams{Name: c.name, Arguments: c.args}
					if c.token != nil {
						params.SetProgressToken(c.token)
					}
					res, err := cs.CallTool(context.Background(), params)
					if err != nil {
						return "error: " + err.Error(), saw.take()
					}
					// Notifications may reach the client's handlers after
					// the result: wait for as many as the call makes.
					got := saw.await(t, notes(c.name, c.token != nil))
					return resultJSON(t, res), got
				}
				slowRes, slowSaw := answer(false)
				before := th.operator.fastCalls.Load()
				fastRes, fastSaw := answer(true)
				if th.operator.fastCalls.Load() != before+1 {
					t.Errorf("%s: the fast path did not answer the call", c.name)
				}
				if fastRes != slowRes {
					t.Errorf("%s %v:\nfast path: %s\nSDK path:  %s", c.name, c.args, fastRes, slowRes)
				}
				if !reflect.DeepEqual(fastSaw, slowSaw) {
					t.Errorf("%s: the client saw\nfast path: %q\nSDK path:  %q", c.name, fastSaw, slowSaw)
				}
			}
			// Cancellation reaches the server either way.
			for _, fast := range []bool{false, true} {
				th.operator.noFast.Store(!fast)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_slow", Arguments: map[string]any{}})
				cancel()
				if err == nil {
					t.Fatalf("fast=%v: a cancelled call answered", fast)
				}
				select {
				case <-cancelled:
				case <-time.After(5 * time.Second):
					t.Fatalf("fast=%v: the server never saw the call cancelled", fast)
				}
			}
			th.operator.noFast.Store(false)
		})
	}
}

// resultJSON is a result as the client read it, in a form two answers
// compare in: its JSON, decoded and written again (keys sorted).
func resultJSON(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(v)
	return string(b)
}

// waitTool waits until the hub lists the named tools: an upstream's arrive
// when it has started.
func waitTool(t *testing.T, th *testHub, names ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := 0
		for _, n := range names {
			if _, ok := th.company.Get(n); !ok {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %v not filed", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The fast path reads Accept and Content-Type as the SDK does: media types
// compared without case, parameters dropped, each value of a repeated
// header and each entry of a list counted.
func TestAcceptsAndMediaType(t *testing.T) {
	for _, c := range []struct {
		accept           []string
		jsonOK, streamOK bool
	}{
		{[]string{"application/json, text/event-stream"}, true, true},
		{[]string{"Application/JSON;q=0.9 , TEXT/Event-Stream"}, true, true},
		{[]string{"application/json", "text/event-stream"}, true, true},
		{[]string{"application/*, text/*"}, true, true},
		{[]string{"*/*"}, true, true},
		{[]string{"application/json"}, true, false},
		{[]string{"text/event-stream"}, false, true},
		{[]string{"application/jsonl, text/event-streams"}, false, false},
		{[]string{""}, false, false},
		{nil, false, false},
	} {
		if j, s := accepts(c.accept); j != c.jsonOK || s != c.streamOK {
			t.Errorf("accepts(%q) = %v, %v; want %v, %v", c.accept, j, s, c.jsonOK, c.streamOK)
		}
	}
	for in, want := range map[string]string{
		"application/json":                 "application/json",
		"Application/JSON; charset=utf-8":  "application/json",
		" application/json ;charset=utf-8": "application/json",
		"text/plain":                       "text/plain",
		"":                                 "",
	} {
		if got := baseMediaType(in); got != want {
			t.Errorf("baseMediaType(%q) = %q; want %q", in, got, want)
		}
	}
}
