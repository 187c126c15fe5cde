package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/encoding/json"
)

// readReply finds the response among what a POST answered, in a JSON body
// or an event stream, and says why when it is not there.
func TestReadReply(t *testing.T) {
	const result = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"items":[1,2]}}}`
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	for _, c := range []struct {
		name, ctype, body string
		want              string // the text answered; "" when an error is wanted
		wantErr           string
	}{
		{name: "json", ctype: "application/json", body: result, want: "hi"},
		{name: "json with charset", ctype: "application/json; charset=utf-8", body: result, want: "hi"},
		{name: "stream", ctype: "text/event-stream", body: "event: message\ndata: " + result + "\n\n", want: "hi"},
		{name: "stream, notification first", ctype: "text/event-stream", body: "data: " + note + "\n\ndata: " + result + "\n\n", want: "hi"},
		{name: "stream, no blank line at its end", ctype: "text/event-stream", body: "id: 1\r\ndata:" + result, want: "hi"},
		{name: "stream, data over two lines", ctype: "text/event-stream",
			body: "data: {\"jsonrpc\":\"2.0\",\"id\":7,\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n", want: "hi"},
		{name: "stream without the response", ctype: "text/event-stream", body: "data: " + note + "\n\n", wantErr: "ended without the response"},
		{name: "another request's response", ctype: "application/json", body: strings.Replace(result, `"id":7`, `"id":8`, 1), wantErr: "not 7"},
		{name: "only a notification", ctype: "application/json", body: note, wantErr: "not the response"},
		{name: "JSON-RPC error", ctype: "application/json", body: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"unknown tool"}}`, wantErr: "-32602: unknown tool"},
		{name: "neither result nor error", ctype: "application/json", body: `{"jsonrpc":"2.0","id":7}`, wantErr: "neither a result nor an error"},
		{name: "not JSON", ctype: "application/json", body: `{"jsonrpc":`, wantErr: "not JSON-RPC"},
		{name: "items not a list", ctype: "application/json", body: strings.Replace(result, `[1,2]`, `{"a":1}`, 1), wantErr: "not JSON-RPC"},
		{name: "unknown content type", ctype: "text/html", body: result, wantErr: "neither JSON nor an event stream"},
		{name: "no content type", ctype: "", body: result, wantErr: "content type"},
	} {
		a, err := readReply(c.ctype, []byte(c.body), "7")
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case a.text() != c.want || len(a.content) != 1 || a.content[0].kind != "text":
			t.Errorf("%s: answered %+v, want the text %q", c.name, a, c.want)
		}
	}
	a, err := readReply("application/json", []byte(result), "7")
	if err != nil || a.items != 2 || a.isError {
		t.Fatalf("items %d, isError %v, %v; want 2 items, no error", a.items, a.isError, err)
	}
}

// captured is every tools/call a server was sent: headers and body.
type captured struct {
	mu    sync.Mutex
	calls []capturedCall
}

type capturedCall struct {
	header http.Header
	body   map[string]any
}

func (c *captured) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m map[string]any
			if json.Unmarshal(body, &m) == nil && m["method"] == "tools/call" {
				c.mu.Lock()
				c.calls = append(c.calls, capturedCall{r.Header.Clone(), m})
				c.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// The lean client sends what the go-sdk client sends, on both revisions:
// the same headers (session, revision, routing) and the same request but
// for its id, and every call it counts was answered with the echo text.
func TestLeanClientSendsTheSDKsRequests(t *testing.T) {
	for _, c := range []struct{ rev, path string }{{rev2025, "/session/mcp"}, {rev2026, "/mcp"}} {
		t.Run(c.rev, func(t *testing.T) {
			var seen captured
			srv := httptest.NewServer(seen.wrap(echoHandler()))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 8}
			defer tr.CloseIdleConnections()
			tg := target{path: "direct", rev: c.rev, url: srv.URL + c.path, token: "t0k3n", tool: "echo", client: clientLean}
			m, err := measure(context.Background(), tg, 1, loadOptions{duration: 10 * time.Second, maxCalls: 20, callTimeout: 5 * time.Second, transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			if m.calls != 20 || m.failed != 0 {
				t.Fatalf("calls %d failed %d, want 20 answered", m.calls, m.failed)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			// The go-sdk call copied, the warm-up call, then the measured
			// ones.
			if len(seen.calls) != 1+1+20 {
				t.Fatalf("%d tools/call requests, want 22", len(seen.calls))
			}
			sdk := seen.calls[0]
			ids := map[any]bool{}
			for i, got := range seen.calls[1:] {
				ids[got.body["id"]] = true
				for k, v := range got.body {
					if k != "id" && !equalJSON(v, sdk.body[k]) {
						t.Errorf("request %d: %s is %v, the go-sdk client sent %v", i+1, k, v, sdk.body[k])
					}
				}
				if len(got.body) != len(sdk.body) {
					t.Errorf("request %d has members %v, the go-sdk client's %v", i+1, slices.Sorted(maps.Keys(got.body)), slices.Sorted(maps.Keys(sdk.body)))
				}
				for _, h := range []string{"Authorization", "Accept", "Content-Type", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"} {
					if got.header.Get(h) != sdk.header.Get(h) {
						t.Errorf("request %d: %s %q, the go-sdk client sent %q", i+1, h, got.header.Get(h), sdk.header.Get(h))
					}
				}
				if c.rev == rev2025 && got.header.Get("Mcp-Session-Id") == "" {
					t.Errorf("request %d carries no session id", i+1)
				}
			}
			if len(ids) != len(seen.calls)-1 {
				t.Errorf("request ids repeat: %d distinct of %d", len(ids), len(seen.calls)-1)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A tool the server does not have fails the go-sdk call the lean client
// would copy, before anything is measured.
func TestLeanDialFailsOnAMissingTool(t *testing.T) {
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err := measure(context.Background(), target{path: "direct", rev: rev2026, url: srv.URL + "/mcp", tool: "no_such_tool", client: clientLean}, 1,
		loadOptions{duration: time.Second, maxCalls: 10, callTimeout: 5 * time.Second, transport: tr})
	if err == nil || !strings.Contains(err.Error(), "the go-sdk call the lean client copies") {
		t.Fatalf("measured a missing tool: %v", err)
	}
}
