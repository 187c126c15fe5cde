package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzOperatorMCP sends what a stranger with a token can send to
// /operator/mcp — any body under any revision header, with or without a
// session — and holds the hub to what it must never do whatever arrives:
// panic, answer 5xx, or send a JSON-RPC error without a code (issue 15,
// finding 13). Its seeds run as a plain test.
func FuzzOperatorMCP(f *testing.F) {
	for _, seed := range []struct{ version, body string }{
		{"", initBody},
		{"2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`},
		{"2026-07-28", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
		{"2026-07-28", `{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
		{"2025-11-25", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\u0000b"}}}`},
		{"2025-11-25", `{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{"uri":"file:///x"}}`},
		{"", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"b","version":"0"}}}]`},
		{"zzz", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`},
		{"2025-11-25", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":"not an object"}}`},
		{"2025-11-25", `{"jsonrpc":"2.0","id":null,"method":"ping"}`},
		{"", `{"jsonrpc":"1.0","id":{},"method":7}`},
		{"", `not json`},
		{"", ``},
	} {
		f.Add(seed.version, []byte(seed.body))
	}
	c, err := config.Parse([]byte(testCompany))
	if err != nil {
		f.Fatal(err)
	}
	h, err := New(context.Background(), Options{
		Company:      c,
		Env:          func(k string) (string, bool) { return "ada-token-123456", k == "ADA_TOKEN" || k == "CI_TOKEN" },
		MaxBodyBytes: 64 << 10,
		// Sessions the fuzzer opens are not kept for the run's life.
		SessionIdle: time.Second,
		FirstParty: []FirstParty{{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
			s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
			servers.Register(s, tr, nil, echoTool())
			return s
		}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	handler := h.Handler()

	f.Fuzz(func(t *testing.T, version string, body []byte) {
		req := httptest.NewRequest("POST", "/operator/mcp", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer ada-token-123456")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" && !strings.ContainsAny(version, "\r\n\x00") {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req.WithContext(ctx))
		if w.Code >= 500 {
			t.Fatalf("%d for %q under %q: %s", w.Code, body, version, w.Body.String())
		}
		for _, msg := range rpcMessages(w.Body.Bytes()) {
			var m struct {
				Error *struct {
					Code *int64 `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(msg, &m) == nil && m.Error != nil && (m.Error.Code == nil || *m.Error.Code == 0) {
				t.Fatalf("a JSON-RPC error without a code for %q under %q: %s", body, version, msg)
			}
		}
	})
}

// rpcMessages are the JSON-RPC messages of an answer: its body as JSON, or
// each SSE event's data.
func rpcMessages(body []byte) [][]byte {
	var out [][]byte
	for _, line := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			out = append(out, d)
		}
	}
	if len(out) == 0 && json.Valid(body) {
		out = append(out, body)
	}
	return out
}
