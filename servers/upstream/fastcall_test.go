//lint:file-ignore SA1019 the test plays a client of the session revisions, which still take logging, sampling and roots.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A fast call answers what the SDK's call answers: the same result, as the
// JSON the server wrote, over stdio and over streamable HTTP, on a session
// revision and on 2026-07-28.
func TestCallRawAnswersWhatCallAnswers(t *testing.T) {
	r := startRemote(t, "127.0.0.1:0", false)
	specs := map[string]Resolved{
		"stdio": testSpec(t, "go-sdk", nil),
		"http":  {Name: "remote", Transport: TransportHTTP, URL: "http://" + r.addr + "/", Headers: map[string]string{"X-Seat": "ada"}},
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			in, _ := startTest(t, spec, nil)
			waitState(t, in, StateRunning, 10*time.Second)
			in.mu.Lock()
			fast := in.fast != nil
			in.mu.Unlock()
			if !fast {
				t.Fatal("the session carries no fast calls")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, args := range []string{`{"text":"hello"}`, `{"text":"line\nbreak \u00e9"}`, `{}`} {
				want, err := in.Call(ctx, "echo", json.RawMessage(args))
				if err != nil {
					t.Fatal(err)
				}
				raw, res, err := in.CallRaw(ctx, "echo", json.RawMessage(args))
				if err != nil || res != nil || raw == nil {
					t.Fatalf("CallRaw(%s) = %s, %v, %v", args, raw, res, err)
				}
				var got mcp.CallToolResult
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(asJSON(t, &got), asJSON(t, want)) {
					t.Fatalf("CallRaw(%s):\n%s\nCall:\n%s", args, raw, asJSON(t, want))
				}
			}
			// A server's protocol error is its own, as from Call.
			_, _, rawErr := in.CallRaw(ctx, "no_such_tool", json.RawMessage(`{}`))
			_, callErr := in.Call(ctx, "no_such_tool", json.RawMessage(`{}`))
			if rawErr == nil || callErr == nil || !strings.Contains(callErr.Error(), rawErr.Error()) {
				t.Fatalf("unknown tool: fast %v, SDK %v", rawErr, callErr)
			}
		})
	}
	r.mu.Lock()
	seen := strings.Join(r.seen, ",")
	r.mu.Unlock()
	if strings.Contains(seen, ",,") || strings.HasPrefix(seen, ",") {
		t.Fatalf("a request went out without the configured header: %q", seen)
	}
}

// MCP-6: a child that dies under a fast call is answered as down, the call
// marked as possibly having taken effect, in the death watch's words.
func TestCallRawInFlightOnDeath(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "go-sdk", nil), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := in.CallRaw(ctx, "crash", json.RawMessage(`{}`))
	var down *DownError
	if !errors.As(err, &down) || !down.InFlight || !strings.Contains(down.Cause, "exited with status 3") {
		t.Fatalf("in-flight fast call: %#v (%v)", down, err)
	}
}

// A caller that gives up gets its context's error, and the server's other
// calls go on.
func TestCallRawCancelled(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "go-sdk", nil), nil)
	waitState(t, in, StateRunning, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := in.CallRaw(ctx, "echo", json.RawMessage(`{"text":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if text, err := callText(t, in, "echo", `{"text":"after"}`); err != nil || text != "after" {
		t.Fatalf("after a cancelled call: %q %v", text, err)
	}
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// progressSink is a client that asked for progress and notes what it got.
type progressSink struct {
	mu   sync.Mutex
	seen []float64
}

func (p *progressSink) Log(context.Context, *mcp.LoggingMessageParams) error { return nil }
func (p *progressSink) Progress(_ context.Context, n *mcp.ProgressNotificationParams) error {
	p.mu.Lock()
	p.seen = append(p.seen, n.Progress)
	p.mu.Unlock()
	return nil
}
func (p *progressSink) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errors.New("no sampling here")
}
func (p *progressSink) Elicit(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, errors.New("no elicitation here")
}
func (p *progressSink) ListRoots(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{}, nil
}
func (p *progressSink) ProgressToken() any { return "client-token" }

// What a stdio server says during a call (its progress) reaches the
// client before the call's answer does, though the answer skips the SDK.
func TestCallRawProgressComesBeforeTheAnswer(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_CHATTY": "1"}), nil)
	waitState(t, in, StateRunning, 10*time.Second)
	for round := range 20 {
		sink := &progressSink{}
		ctx, cancel := context.WithTimeout(WithDownstream(context.Background(), sink), 10*time.Second)
		raw, _, err := in.CallRaw(ctx, "chatty", json.RawMessage(`{}`))
		cancel()
		sink.mu.Lock()
		seen := slices.Clone(sink.seen)
		sink.mu.Unlock()
		if err != nil || raw == nil || !reflect.DeepEqual(seen, []float64{1, 2, 3}) {
			t.Fatalf("round %d: %s %v; progress seen before the answer: %v", round, raw, err, seen)
		}
	}
}

// A stdio server that has read a call but answers only when more input
// arrives (a Go 1.26 server parked in a blocking read of stdin) is pinged
// until it answers: each call gets its answer long before its bound, and
// the session stays up.
func TestLateStdioAnswerIsNudged(t *testing.T) {
	in, _ := startTest(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_TEST_WEDGED": "1"}), nil)
	waitState(t, in, StateRunning, 10*time.Second)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		raw, res, err := in.CallRaw(ctx, "old_tool", json.RawMessage(`{}`))
		cancel()
		if err != nil || res != nil || !strings.Contains(string(raw), "legacy answer") {
			t.Fatalf("CallRaw = %s, %v, %v; want the held answer", raw, res, err)
		}
	}
	if s := in.Status(); s.State != StateRunning {
		t.Fatalf("the server is %s after the pings", s.State)
	}
}
