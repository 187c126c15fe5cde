package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

const limitsToken = "env-token-0123456789abcdef"

// runWithLimits runs the embedded company under short HTTP limits and
// returns its host:port.
func runWithLimits(t *testing.T, l HTTPLimits) string {
	t.Helper()
	env := func(k string) (string, bool) { return limitsToken, k == "CREWLET_OPERATOR_TOKEN" }
	base, _, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: env, HTTP: l})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return strings.TrimPrefix(base, "http://")
}

// sessionStream opens a 2025 session and its event stream (a GET held
// open for the session's life) on a connection of its own.
func sessionStream(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("POST", "http://"+addr+"/operator/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	req.Header.Set("Authorization", "Bearer "+limitsToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /operator/mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", addr, limitsToken, id)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	stream, err := http.ReadResponse(br, nil)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", stream, err)
	}
	return c, br
}

// Issue 15 finding 8: connections nobody uses are closed — one that
// never sends a request within the header timeout, one left idle after a
// request within the idle timeout — while a session's event stream, which
// is a request that is still being answered, outlives the read timeout.
func TestHTTPServerClosesConnectionsNobodyUses(t *testing.T) {
	addr := runWithLimits(t, HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond})

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if !hubtest.ClosedWithin(t, silent, silent, 5*time.Second) {
		t.Fatal("a connection that sent nothing is still open after 5 s")
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !hubtest.ClosedWithin(t, idle, br, 5*time.Second) {
		t.Fatal("a keep-alive connection left idle is still open after 5 s")
	}

	c, stream := sessionStream(t, addr)
	if hubtest.ClosedWithin(t, c, stream, 2*time.Second) {
		t.Fatal("a session's event stream was closed by the read timeout")
	}
}

// Issue 15 finding 8: no more than MaxConns connections are served at
// once; the next waits until one ends.
func TestHTTPServerServesAtMostMaxConns(t *testing.T) {
	addr := runWithLimits(t, HTTPLimits{MaxConns: 3})
	var streams []net.Conn
	for range 3 {
		c, _ := sessionStream(t, addr)
		streams = append(streams, c)
	}
	got := make(chan error, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a fourth connection was served beside three open ones: %v", err)
	case <-time.After(time.Second):
	}
	streams[0].Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not served once one ended")
	}
}
