//lint:file-ignore SA1019 the tests play clients and servers of the session revisions, which still send and take sampling.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func sampled(text string) func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: text}}, nil
	}
}

// Issue 25 defect 4: a call whose client never answers the server's
// sampling request (a client that hung up) ends at its bound all the same
// (over stdio and SSE the request names its call by progress token);
// the server's request is answered with an error, the call leaves the
// flights, and the next call's sampling reaches its own client.
func TestAbandonedSamplingEndsWithItsCall(t *testing.T) {
	g := startRig(t, false, nil)
	// Over HTTP the request comes on the call's own stream; over stdio and
	// legacy SSE on the session's one connection, through the SDK's client.
	specs := map[string]Resolved{
		"http":  {Name: "rig", Transport: TransportHTTP, URL: g.url},
		"stdio": testSpec(t, "go-sdk", map[string]string{"UPSTREAM_RIG_TOOLS": "1"}),
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
	deaf := &scripted{token: "deaf", sample: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
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
	ctx2, cancel2 := context.WithTimeout(WithDownstream(context.Background(), &scripted{token: "next", sample: sampled("hi")}), 10*time.Second)
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
