package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// relayTo serves the relay in front of upstream, closed with the test.
func relayTo(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	h, err := relayHandler(upstream)
	if err != nil {
		t.Fatal(err)
	}
	relay := httptest.NewServer(h)
	t.Cleanup(relay.Close)
	return relay
}

// The relay row measures Go's stock reverse proxy in front of the echo: it
// must pass every call of both revisions and both clients through
// unchanged, event streams included, or its row measures failures.
func TestRelayPassesCallsThrough(t *testing.T) {
	echo := httptest.NewServer(echoHandler())
	defer echo.Close()
	relay := relayTo(t, echo.URL)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	for _, rev := range []string{rev2025, rev2026} {
		for _, client := range []string{clientSDK, clientLean} {
			for _, path := range []string{"/mcp", "/session/mcp"} {
				if path == "/session/mcp" && rev == rev2026 {
					continue // 2026-07-28 has no sessions
				}
				tg := target{path: "relay", rev: rev, url: relay.URL + path, tool: echoTool, client: client}
				m, err := measure(context.Background(), tg, 4,
					loadOptions{duration: 10 * time.Second, maxCalls: 400, callTimeout: 5 * time.Second, transport: tr})
				if err != nil {
					t.Fatalf("%s %s %s: %v", rev, client, path, err)
				}
				if m.calls != 400 || m.failed != 0 {
					t.Errorf("%s %s %s: %d calls, %d failed; want 400, none failed", rev, client, path, m.calls, m.failed)
				}
			}
		}
	}
}

func TestRelayRefusesABadTarget(t *testing.T) {
	for _, to := range []string{"", "127.0.0.1:80", "ftp://host", "http://", "http://[::1"} {
		if _, err := relayHandler(to); err == nil {
			t.Errorf("--to %q: accepted, want an error", to)
		}
	}
}

// Calls made one after another on one kept connection, each answered on an
// event stream, with the echo and the relay processes of their own as in a
// run: every answer must arrive whole. A relay that streams the request
// body through cuts the end off some answers (go.dev/issue/40747); that
// shows only when the three run apart, as they do here.
func TestRelayAnswersArriveWhole(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	echo, echoAddr, err := startServer("echo server", self, "echo-server", "--http", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.stop(5 * time.Second)
	relay, relayAddr, err := startServer("relay", self, "relay", "--to", "http://"+echoAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.stop(5 * time.Second)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	const calls = 3000
	broken := 0
	for i := range calls {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":%q}}}`, i, echoTool, echoText)
		req, _ := http.NewRequest(http.MethodPost, "http://"+relayAddr+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", rev2025)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			broken++
			continue
		}
		if a, err := readReply(resp.Header.Get("Content-Type"), b, strconv.Itoa(i)); err != nil || a.text() != echoText {
			t.Fatalf("call %d: answered %+v, %v", i, a, err)
		}
	}
	if broken > 0 {
		t.Fatalf("%d of %d answers were cut short", broken, calls)
	}
}

// A body over the relay's bound is refused before anything is sent on, and
// says why; one that breaks off is refused as a bad request.
func TestRelayRefusesBadBodies(t *testing.T) {
	var reached atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer upstream.Close()
	relay := relayTo(t, upstream.URL)

	resp, err := http.Post(relay.URL+"/mcp", "application/json", strings.NewReader(strings.Repeat("x", maxRelayBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "request body too large") {
		t.Errorf("oversized body: %s %q, want 413 saying the body is too large", resp.Status, b)
	}

	// A body shorter than its Content-Length: the client hangs up mid-body.
	conn, err := net.Dial("tcp", strings.TrimPrefix(relay.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
	_ = conn.(*net.TCPConn).CloseWrite()
	reply, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasPrefix(string(reply), "HTTP/1.1 400") {
		t.Errorf("broken-off body: answered %.60q, want 400", reply)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the upstream was sent %d refused requests", n)
	}
}
