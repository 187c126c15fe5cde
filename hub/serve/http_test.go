package serve

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
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

// Issue 25 defect 7: a connection that sends part of a request head and
// then stops is closed at the header timeout, once: nothing in front of
// the HTTP server waits a timeout of its own first.
func TestHTTPServerClosesAPartialHeadAtTheHeaderTimeout(t *testing.T) {
	const headerTimeout = time.Second
	addr := runWithLimits(t, HTTPLimits{ReadHeaderTimeout: headerTimeout, ReadTimeout: 30 * time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Half: ", addr)
	if !hubtest.ClosedWithin(t, c, c, headerTimeout*9/5) {
		t.Fatalf("a partial request head is still open %s after it was sent (header timeout %s)", headerTimeout*9/5, headerTimeout)
	}
}

// Issue 25 defect 7: a head past the limit is answered 431 and the
// connection closed cleanly — the answer and then a clean end (a FIN, or
// TLS's close_notify), not a reset — while the client is still sending
// its header and much of it sits unread by the server. net/http ends such
// a connection with CloseWrite and a linger; a connection that hides
// CloseWrite is closed outright with unread data, which the kernel
// answers with a reset that can cost the client the 431.
func TestHTTPServerAnswersAnOversizedHead431(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		addr := runWithLimits(t, HTTPLimits{})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		oversizedHeadIsAnswered431(t, c, addr)
	})
	t.Run("https", func(t *testing.T) {
		h := runTLS(t, HTTPLimits{})
		addr := strings.TrimPrefix(h.base, "https://")
		// HTTP/1.1: the 431 and its close are the HTTP/1 server's.
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: h.ca.Pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		oversizedHeadIsAnswered431(t, c, addr)
	})
}

// oversizedHeadIsAnswered431 sends on c a request whose one header runs
// far past the limit, writing on as a client with a big header does, and
// reads the answer to its end: a 431, then EOF.
func oversizedHeadIsAnswered431(t *testing.T, c net.Conn, addr string) {
	t.Helper()
	wrote := make(chan struct{})
	defer func() {
		c.Close()
		<-wrote
	}()
	go func() {
		defer close(wrote)
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Big: ", addr); err != nil {
			return
		}
		// Far more than the server reads before it answers, so what it
		// leaves unread is in its receive buffer when it closes. The
		// writes end in an error once the server has gone.
		chunk := []byte(strings.Repeat("a", 4<<10))
		for sent := 0; sent < 16*maxHeaderBytes; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the answer to an oversized head was lost: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("an oversized head was answered %s, want 431", resp.Status)
	}
	// The answer is delimited by the connection's end, so reading it
	// whole reads to that end: io.ReadAll stops at io.EOF without error,
	// and fails on a reset.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("after the 431 (%q so far) the connection ended with %v, want a clean EOF (reset: %t)",
			body, err, errors.Is(err, syscall.ECONNRESET))
	}
	if string(body) != "431 Request Header Fields Too Large" {
		t.Fatalf("the 431's body is %q", body)
	}
}

// The read timeout bounds a client sending its request, not the hub
// answering it: a request whose body has been read keeps its context past
// the timeout (a long call, a 2025 session's stream), while a body still
// arriving when it passes is cut.
func TestReadTimeoutBoundsTheRequestNotTheAnswer(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, ln := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			// The client will not read this: its request was cut.
			return
		case <-time.After(4 * readTimeout):
			fmt.Fprint(w, "answered")
		}
	}), ln, HTTPLimits{ReadTimeout: readTimeout}, slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	for _, body := range []io.Reader{nil, strings.NewReader(`{"jsonrpc":"2.0"}`)} {
		resp, err := http.Post(base, "application/json", body)
		if err != nil {
			t.Fatalf("a request whose answer takes past the read timeout: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "answered" {
			t.Fatalf("a request whose answer takes past the read timeout got %s %q", resp.Status, b)
		}
	}

	// A body that stops arriving halfway is cut at the read timeout.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"half\":")
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * readTimeout))
	if resp, err := http.ReadResponse(br, nil); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "answered" {
			t.Fatal("a body that stopped halfway was answered as if whole")
		}
	}
	if !hubtest.ClosedWithin(t, c, br, 10*readTimeout) {
		t.Fatal("a connection whose body stopped halfway is still open past the read timeout")
	}
}
