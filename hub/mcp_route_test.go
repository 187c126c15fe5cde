package hub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcPost sends one raw POST to the operator endpoint as the
// administrator and returns the status and the JSON-RPC error it carried,
// if any (read from a JSON body or the first SSE event).
func rpcPost(t *testing.T, url string, hdr map[string]string, body string) (int, *jsonrpc.Error, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer ada-token-123456")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	if i := strings.Index(text, "data: "); i >= 0 {
		text = strings.TrimSpace(strings.SplitN(text[i+len("data: "):], "\n", 2)[0])
	}
	var msg struct {
		Error *jsonrpc.Error `json:"error"`
	}
	_ = json.Unmarshal([]byte(text), &msg)
	return resp.StatusCode, msg.Error, string(raw)
}

// Issue 15 finding 13: the protocol revision header is read as a date.
// "zzz" is no revision newer than every other (as a string comparison
// took it), and a date the hub does not speak is refused naming the ones
// it does, as a JSON-RPC error carrying a code.
func TestProtocolRevisionHeaderIsReadAsARevision(t *testing.T) {
	th := newTestHub(t)
	url := th.url + "/operator/mcp"
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"zzz"}}}`
	for _, v := range []string{"zzz", "2027-01-01", "2025-13-45", strings.Repeat("9", 4000)} {
		status, rpcErr, raw := rpcPost(t, url, map[string]string{"Mcp-Protocol-Version": v}, list)
		if status != http.StatusBadRequest || rpcErr == nil || rpcErr.Code != mcp.CodeUnsupportedProtocolVersion {
			t.Fatalf("%.20q: %d %s", v, status, raw)
		}
		for _, want := range mcp.SupportedProtocolVersions() {
			if !strings.Contains(rpcErr.Message, want) {
				t.Fatalf("%.20q: the answer does not name %s: %s", v, want, rpcErr.Message)
			}
		}
		if len(raw) > 1024 {
			t.Fatalf("%.20q: the header came back in a %d-byte answer", v, len(raw))
		}
	}
	// Every revision it speaks still reaches the handler for it.
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		cs := hubtest.Connect(t, url, "ada-token-123456", v)
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
}

// Issue 15 finding 13: a batch cannot open a session; it is refused with
// a JSON-RPC error saying what to send instead, and no session is made.
func TestBatchBeforeASessionIsRefused(t *testing.T) {
	th := newTestHub(t)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}]`
	status, rpcErr, raw := rpcPost(t, th.url+"/operator/mcp", nil, " \n"+batch)
	if status != http.StatusBadRequest || rpcErr == nil || rpcErr.Code != jsonrpc.CodeInvalidRequest ||
		!strings.Contains(rpcErr.Message, "send initialize on its own") {
		t.Fatalf("%d %s", status, raw)
	}
	n := 0
	for range th.operator.server.Sessions() {
		n++
	}
	if n != 0 {
		t.Fatalf("the batch opened %d sessions", n)
	}
}

// Issue 15 finding 13: no JSON-RPC error leaves the hub with code 0: an
// error of the hub's own that names no code is an internal error, and a
// subscription to a resource nobody offers is invalid params.
func TestJSONRPCErrorsAlwaysCarryACode(t *testing.T) {
	th := newTestHub(t)
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2025-11-25")
	err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "file:///nobody/offers/this"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("subscribe to nothing: %#v", err)
	}

	// The SDK's own check, before any handler runs: a call that opens no
	// session.
	status, rpcErr, raw := rpcPost(t, th.url+"/operator/mcp", map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":"x\"y","method":"tools/list"}`)
	if rpcErr == nil || rpcErr.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("a call without a session: %d %s", status, raw)
	}

	plain := codedErrors(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return nil, io.ErrUnexpectedEOF
	})
	if _, err := plain(context.Background(), "resources/read", nil); !errors.As(err, &wire) ||
		wire.Code != jsonrpc.CodeInternalError || wire.Message != io.ErrUnexpectedEOF.Error() {
		t.Fatalf("a plain error: %#v", err)
	}
	coded := codedErrors(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}
	})
	if _, err := coded(context.Background(), "resources/read", nil); !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a coded error was recoded: %#v", err)
	}
}
