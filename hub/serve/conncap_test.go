package serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 37 (connections): with MaxConns connections serving requests the
// next one is answered 503 with Retry-After and a sentence naming the cap
// and --max-conns, then ends with a clean FIN; it is not left in the
// kernel's queue, where behind 2025 sessions' event streams (each holds
// its slot for the session's life) it would wait for good. A slot freed
// serves a new connection again.
func TestConnectionPastTheCapIsAnswered503(t *testing.T) {
	addr := runWithLimits(t, HTTPLimits{MaxConns: 3, ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute})
	// The slots are held by requests in service, as an event stream
	// holds one (a connection serving no request would give its slot to
	// the newcomer: TestIdleSocketsDoNotKeepAVerifiedClientOut).
	var held []net.Conn
	for range 3 {
		h, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		inService(t, h, addr)
		held = append(held, h)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A hang detector only: the answer is due at once.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	overCapIs503(t, bufio.NewReader(c), 3)

	held[0].Close()
	waitFor(t, "a new connection served once a slot was freed", func() bool {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// inService makes c hold its slot as a request being answered does: an
// authenticated POST whose body never comes. The hub's 100 Continue says
// its handler is reading the body, so the request is in service.
func inService(t *testing.T, c net.Conn, host string) {
	t.Helper()
	fmt.Fprintf(c, "POST /operator/mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n", host, limitsToken)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("a request held in service: read %q, %v; want 100 Continue", line, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

// Issue 37 (connections), over HTTPS: the connection past the cap
// completes its handshake — offered HTTP/1.1 alone, even by a client that
// asks for HTTP/2 first — and reads the same 503.
func TestConnectionPastTheCapIsAnswered503OverTLS(t *testing.T) {
	h := runTLS(t, HTTPLimits{MaxConns: 1, ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute})
	host := strings.TrimPrefix(h.base, "https://")
	// The one slot, held by a request in service.
	held, err := tls.Dial("tcp", host, &tls.Config{RootCAs: h.ca.Pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	inService(t, held, host)

	// The dialer's timeout (the handshake's too) is a hang detector only.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", host,
		&tls.Config{RootCAs: h.ca.Pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("the connection past the cap: handshake: %v", err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("the connection past the cap negotiated %q, want http/1.1", p)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	overCapIs503(t, bufio.NewReader(c), 1)
}

// overCapIs503 reads on br the answer to a connection past a cap of n:
// 503, Retry-After, the sentence, then a clean end (EOF, not a reset).
func overCapIs503(t *testing.T, br *bufio.Reader, n int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection past the cap read no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the 503's body: %v (read %q)", err, body)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the connection past the cap was answered %s, want 503", resp.Status)
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs <= 0 {
		t.Fatalf("the 503's Retry-After is %q, want whole seconds", resp.Header.Get("Retry-After"))
	}
	if want := "at most " + count(n, "connection", "connections"); !strings.Contains(string(body), want) || !strings.Contains(string(body), "--max-conns") {
		t.Fatalf("the 503's body %q does not name the cap (%q) and --max-conns", body, want)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("after the 503 the connection ended with %v, want a clean EOF (reset: %t)", err, errors.Is(err, syscall.ECONNRESET))
	}
	if len(rest) != 0 {
		t.Fatalf("after the 503 the hub sent %q", rest)
	}
}

// Issue 37 (connections): answering connections past the cap is bounded
// too. With overflowInFlight answers in flight (connections that send
// nothing, each held until its answer's deadline), the next connection
// past the cap is closed at once, unanswered, rather than given a
// goroutine of its own.
func TestConnectionsPastTheCapBeyondTheAnswersInFlightAreClosed(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 1, nil)
	ln.(*limitListener).answerWithin = time.Minute
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// The one within the cap is held, serving a request: a
			// connection serving none would give its slot to the next.
			c.(*limitConn).begin()
			defer c.Close()
		}
	}()
	addr := inner.Addr().String()
	// Accepted in the order they connect: the first takes the slot, the
	// next overflowInFlight take every answer in flight.
	for range 1 + overflowInFlight {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection past the answers in flight was held (read %q), want it closed at once", got)
	}
	if len(got) != 0 {
		t.Fatalf("a connection past the answers in flight was answered %q, want it closed unanswered", got)
	}
}

// Issue 37 (connections): a connection that sends nothing after it is
// accepted holds its slot no longer than the header timeout — net/http
// arms the header deadline for a connection's first request as soon as
// it serves the connection, not after the idle timeout — so a silent
// socket cannot keep a working client on the 503.
func TestSilentConnectionFreesItsSlotAtTheHeaderTimeout(t *testing.T) {
	addr := runWithLimits(t, HTTPLimits{MaxConns: 1, ReadHeaderTimeout: 300 * time.Millisecond,
		ReadTimeout: time.Minute, IdleTimeout: time.Minute})
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Well under the idle timeout (a minute), well over the header one.
	if !hubtest.ClosedWithin(t, silent, silent, 10*time.Second) {
		t.Fatal("a connection that sent nothing is still open 10 s on (header timeout 300ms)")
	}
	waitFor(t, "a new connection served once the silent one was closed", func() bool {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Issue 37 (connections): sockets that send nothing, or part of a head
// and then nothing, cannot keep a verified client out, even when they
// fill every slot and the header timeout is a minute away: each newcomer
// past the cap takes the place of the socket that has waited longest for
// a request, which is closed. Twice the cap of such sockets, then a
// verified MCP client, whose session and call are answered within a
// second (a deadline, not a wait); the sockets that waited longest were
// closed for the newcomers.
func TestIdleSocketsDoNotKeepAVerifiedClientOut(t *testing.T) {
	const maxConns = 8
	addr := runWithLimits(t, HTTPLimits{MaxConns: maxConns, ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: time.Minute})
	var socks []net.Conn
	for i := range 2 * maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 1 {
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
		}
		socks = append(socks, c)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hc := &http.Client{Transport: hubtest.Bearer{Token: limitsToken}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "verified", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/operator/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("a verified client behind %d idle sockets: %v", 2*maxConns, err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("a verified client's call behind %d idle sockets: %v", 2*maxConns, err)
	}

	// Accepted in the order they connected: the first maxConns gave
	// their places to the next maxConns, the one after to the client.
	for i := range maxConns + 1 {
		if !hubtest.ClosedWithin(t, socks[i], socks[i], 10*time.Second) {
			t.Fatalf("idle socket %d of %d is still open, want it closed for a newcomer", i, 2*maxConns)
		}
	}
}
