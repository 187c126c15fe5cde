package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 25 defect 1: a result that holds "method" anywhere but at the top
// of the message (structured content, _meta, a text) is the call's answer,
// on every transport and both revisions.
func TestResultHoldingMethodIsAnswered(t *testing.T) {
	for rev, modern := range revisions {
		g := startRig(t, modern, nil)
		env := map[string]string{"UPSTREAM_RIG_TOOLS": "1"}
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
