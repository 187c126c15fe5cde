package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingUpstream is a third-party server on 2026-07-28 alone whose tools
// ask their client to confirm (an elicitation in input requests,
// SEP-2322) before they answer, in a message holding a configured secret
// and an operator token, with a request state holding the secret too. It
// records every call it takes: the answers and the state each carried.
type askingUpstream struct {
	url   string
	mu    sync.Mutex
	calls []askingCall
}

type askingCall struct {
	tool      string
	responses mcp.InputResponseMap
	state     string
}

// upState is the state the server gives with its question: its own, and
// not the client's to read.
const upState = "up-state " + upKey

func newAskingUpstream(t *testing.T) *askingUpstream {
	t.Helper()
	u := &askingUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "0"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	for _, tool := range []string{"confirm", "other"} {
		s.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.calls = append(u.calls, askingCall{tool: tool, responses: req.Params.InputResponses, state: req.Params.RequestState})
			u.mu.Unlock()
			if res, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult); ok {
				if req.Params.RequestState != upState+" "+tool {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "state not mine: " + req.Params.RequestState}}}, nil
				}
				answer, _ := res.Content["answer"].(string)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + " confirmed: " + res.Action + " " + answer}}}, nil
			}
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Mode: "form", Message: "confirm? " + leakTxt,
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}},
				RequestState: upState + " " + tool,
			}, nil
		})
	}
	u.url = hubtest.ServeMCP(t, s, &mcp.StreamableHTTPOptions{Stateless: true})
	return u
}

func (u *askingUpstream) take() []askingCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.calls
	u.calls = nil
	return out
}

// connectAs connects a go-sdk client on revision to the hub's
// /operator/mcp with token, recording the bytes the hub sends it.
func connectAs(t *testing.T, th *testHub, token, revision string, rec *wireRecorder, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "rounds", Version: "0"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: th.url + "/operator/mcp", HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: token, Base: rec}}},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A client on 2026-07-28 answers a 2026-07-28 server's input requests
// through the hub (SEP-2322): the hub answers it the server's requests,
// sanitised (OUT-1), with a request state of its own, and carries the
// client's answers and the server's own state on in the client's next
// call, through the fast path and the SDK's. A client on a session
// revision is still asked by the hub over its session.
func TestInputRequestsReachA2026Client(t *testing.T) {
	up := newAskingUpstream(t)
	th := keyedHub(t, "asking", up.url)
	waitTool(t, th, "confirm", "other")
	for _, revision := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(revision, func(t *testing.T) {
			rec := &wireRecorder{}
			var asked []string
			var mu sync.Mutex
			cs := connectAs(t, th, adaTok, revision, rec, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes-42"}}, nil
				},
			})
			for _, fast := range []bool{true, false} {
				th.operator.noFast.Store(!fast)
				rec.take()
				up.take()
				mu.Lock()
				asked = nil
				mu.Unlock()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{}})
				if err != nil || res.IsError || hubtest.Text(res) != "confirm confirmed: accept yes-42" {
					t.Fatalf("fast=%v: the call did not end with the client's answer: %v %s", fast, err, resultJSON(t, res))
				}
				calls := up.take()
				if len(calls) != 2 || calls[0].responses != nil || calls[1].state != upState+" confirm" {
					t.Fatalf("fast=%v: the server saw %+v, want a first call and one with its own state back", fast, calls)
				}
				if got, _ := calls[1].responses["ok"].(*mcp.ElicitResult); got == nil || got.Content["answer"] != "yes-42" {
					t.Errorf("fast=%v: the server got the answers %+v, not the client's", fast, calls[1].responses)
				}
				mu.Lock()
				if len(asked) != 1 || !strings.Contains(asked[0], sanitize.Redacted) || strings.Contains(asked[0], upKey) {
					t.Errorf("fast=%v: the client was asked %q, want the server's question redacted", fast, asked)
				}
				mu.Unlock()
				raw := rec.take()
				for _, leak := range []string{upKey, adaTok, "up-state"} {
					if i := strings.Index(raw, leak); i >= 0 {
						t.Errorf("fast=%v: the client received %q: ...%s...", fast, leak, raw[max(0, i-120):min(len(raw), i+40)])
					}
				}
			}
			th.operator.noFast.Store(false)
		})
	}
}

// The request state a 2026-07-28 client gets with a server's input
// requests is bound to the caller, the tool and the call's arguments:
// brought to another tool, by another seat's credential, with other
// arguments (issue 36, Why 10: a state could be reused any number of
// times so), changed, or left out beside answers, the follow-up is
// refused invalid and nothing reaches the server. The same state brought
// back as given, with the call's arguments, completes the call.
func TestInputRoundStateIsBound(t *testing.T) {
	up := newAskingUpstream(t)
	th := keyedHub(t, "asking", up.url)
	waitTool(t, th, "confirm", "other")
	// Clients that handle the rounds themselves, as a raw client would.
	raw := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	ada := connectAs(t, th, adaTok, "2026-07-28", &wireRecorder{}, raw)
	ci := connectAs(t, th, "ci-token-123456", "2026-07-28", &wireRecorder{}, raw)
	answers := mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "forged"}}}
	for _, fast := range []bool{true, false} {
		th.operator.noFast.Store(!fast)
		args := map[string]any{"n": 1, "item": "CORE-1"}
		first, err := ada.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirm", Arguments: args})
		if err != nil || !first.NeedsInput() || first.InputRequests["ok"] == nil {
			t.Fatalf("fast=%v: the first answer did not ask for input: %v %s", fast, err, resultJSON(t, first))
		}
		state := first.RequestState
		if !strings.HasPrefix(state, sealedStatePrefix) || strings.Contains(state, "up-state") {
			t.Fatalf("fast=%v: the client was given the state %q, not the hub's", fast, state)
		}
		up.take()
		tampered := []byte(state)
		tampered[len(tampered)-2] ^= 1
		for _, c := range []struct {
			why   string
			cs    *mcp.ClientSession
			tool  string
			state string
			args  any
		}{
			{"brought to another tool", ada, "other", state, args},
			{"brought by another seat", ci, "confirm", state, args},
			{"brought with other arguments", ada, "confirm", state, map[string]any{"n": 2, "item": "CORE-1"}},
			{"brought with no arguments", ada, "confirm", state, map[string]any{}},
			{"changed", ada, "confirm", string(tampered), args},
			{"forged", ada, "confirm", sealedStatePrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", args},
			{"the server's own", ada, "confirm", upState + " confirm", args},
			{"left out beside answers", ada, "confirm", "", args},
		} {
			res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args,
				InputResponses: answers, RequestState: c.state})
			if err != nil || !res.IsError || res.Meta[servers.MetaRefusal] != string(authority.Invalid) || !strings.Contains(hubtest.Text(res), "requestState") {
				t.Errorf("fast=%v: a state %s was not refused invalid: %v %s", fast, c.why, err, resultJSON(t, res))
			}
			if calls := up.take(); len(calls) != 0 {
				t.Errorf("fast=%v: a state %s reached the server: %+v", fast, c.why, calls)
			}
		}
		// The same arguments, written in another order: the same call.
		res, err := ada.CallTool(context.Background(), &mcp.CallToolParams{Name: "confirm", Arguments: json.RawMessage(`{"item":"CORE-1", "n":1}`),
			InputResponses: mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "mine"}}}, RequestState: state})
		if err != nil || res.IsError || hubtest.Text(res) != "confirm confirmed: accept mine" {
			t.Errorf("fast=%v: the state as given did not complete the call: %v %s", fast, err, resultJSON(t, res))
		}
	}
	th.operator.noFast.Store(false)
}
