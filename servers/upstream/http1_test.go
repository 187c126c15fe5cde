package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// connCounter counts the connections a test server was opened and closed.
type connCounter struct {
	mu             sync.Mutex
	opened, closed int
	closedCh       chan struct{}
}

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.opened++
	case http.StateClosed, http.StateHijacked:
		c.closed++
		select {
		case c.closedCh <- struct{}{}:
		default:
		}
	}
}

func (c *connCounter) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

// http1Server serves h on a real loopback listener and counts its
// connections.
func http1Server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connCounter) {
	t.Helper()
	cc := &connCounter{closedCh: make(chan struct{}, 16)}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = cc.track
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cc
}

func http1Post(t *testing.T, ctx context.Context, p *http1Pool, u, body string) (string, *http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Probe", "yes")
	resp, err := p.do(req)
	if err != nil {
		return "", nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b), resp, err
}

// Fast calls to a plain-HTTP server go out on one kept connection, one
// after another, with their headers and bodies as written; a connection
// the server closed while it waited is found before the next request is
// written, which then goes on a new one; a response that asks for the
// connection to close, an event stream read to its end, and a body left
// unread each do what the client would.
func TestHTTP1PoolKeepsConnections(t *testing.T) {
	srv, cc := http1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch string(b) {
		case "close":
			w.Header().Set("Connection", "close")
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		case "early":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			fmt.Fprint(w, "after hints")
			return
		case "large":
			w.Write(bytes.Repeat([]byte("x"), 1<<20))
			return
		}
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Probe"), b)
	})
	p := newHTTP1Pool(srv.URL+"/mcp", nil)
	if p == nil {
		t.Fatal("no pool for a plain-HTTP URL")
	}
	defer p.close()
	ctx := context.Background()
	for i := range 5 {
		body := fmt.Sprint("call-", i)
		got, _, err := http1Post(t, ctx, p, srv.URL+"/mcp", body)
		if err != nil || got != "POST yes "+body {
			t.Fatalf("call %d: %q %v", i, got, err)
		}
	}
	if opened, _ := cc.counts(); opened != 1 || idleConns(p) != 1 {
		t.Fatalf("five calls one after another opened %d connections and keep %d", opened, idleConns(p))
	}

	// The server closes every connection, as an idle timeout or a restart
	// does: the next call finds out before writing and dials.
	srv.CloseClientConnections()
	if got, _, err := http1Post(t, ctx, p, srv.URL+"/mcp", "after"); err != nil || got != "POST yes after" {
		t.Fatalf("the call after the server closed the kept connection: %q %v", got, err)
	}
	if opened, _ := cc.counts(); opened != 2 {
		t.Fatalf("after the close: %d connections opened, want 2", opened)
	}

	// An event stream read to its end keeps the connection.
	if got, resp, err := http1Post(t, ctx, p, srv.URL+"/mcp", "stream"); err != nil || got != "data: 0\n\ndata: 1\n\ndata: 2\n\n" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the stream: %q %v", got, err)
	}
	if opened, _ := cc.counts(); opened != 2 {
		t.Fatalf("after the stream: %d connections opened, want 2", opened)
	}

	// An informational answer before the response is passed over.
	if got, resp, err := http1Post(t, ctx, p, srv.URL+"/mcp", "early"); err != nil || got != "after hints" || resp.StatusCode != http.StatusOK {
		t.Fatalf("a response after early hints: %q %v", got, err)
	}

	// Connection: close is honoured.
	_, closedBefore := cc.counts()
	if _, resp, err := http1Post(t, ctx, p, srv.URL+"/mcp", "close"); err != nil || !resp.Close {
		t.Fatalf("a response asking to close: %v", err)
	}
	if n := idleConns(p); n != 0 {
		t.Fatalf("a connection whose response asked to close is kept (%d kept)", n)
	}
	waitClosed(t, cc, closedBefore+1)
	if got, _, err := http1Post(t, ctx, p, srv.URL+"/mcp", "next"); err != nil || got != "POST yes next" {
		t.Fatalf("the call after a closing response: %q %v", got, err)
	}
	if opened, _ := cc.counts(); opened != 3 {
		t.Fatalf("after a closing response: %d connections opened, want 3", opened)
	}

	// A body closed before its end closes its connection rather than
	// leaving the rest of the response to the next call.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader([]byte("large")))
	resp, err := p.do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_, closedBefore = cc.counts()
	resp.Body.Close()
	resp.Body.Close() // twice is safe
	waitClosed(t, cc, closedBefore+1)
	if got, _, err := http1Post(t, ctx, p, srv.URL+"/mcp", "last"); err != nil || got != "POST yes last" {
		t.Fatalf("the call after an abandoned body: %q %v", got, err)
	}

	// Closed, the pool closes what it kept and takes no more calls.
	_, closedBefore = cc.counts()
	p.close()
	p.close()
	waitClosed(t, cc, closedBefore+1)
	if _, _, err := http1Post(t, ctx, p, srv.URL+"/mcp", "late"); !errors.Is(err, errHTTP1Closed) {
		t.Fatalf("a call after close: %v", err)
	}
}

func idleConns(p *http1Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func waitClosed(t *testing.T, cc *connCounter, want int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if _, closed := cc.counts(); closed >= want {
			return
		}
		select {
		case <-cc.closedCh:
		case <-deadline:
			_, closed := cc.counts()
			t.Fatalf("the server saw %d connections closed, want %d", closed, want)
		}
	}
}

// A call whose context ends while the server has not answered ends at once
// with the context's error, and its connection is closed, never kept: what
// the server writes later must not become the next call's answer.
func TestHTTP1PoolCallCancelled(t *testing.T) {
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	srv, _ := http1Server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "hold" {
			arrived <- struct{}{}
			// The server's request context ends when the client's end of
			// the connection closes.
			<-r.Context().Done()
			gone <- struct{}{}
			return
		}
		fmt.Fprintf(w, "ok %s", b)
	})
	p := newHTTP1Pool(srv.URL, nil)
	defer p.close()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte("hold")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := p.do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a call cancelled while it waited: %v", err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call's connection was not closed")
	}
	if got, _, err := http1Post(t, context.Background(), p, srv.URL, "after"); err != nil || got != "ok after" {
		t.Fatalf("the next call: %q %v", got, err)
	}
}

// The pool takes only what the client would send as written: a plain-HTTP
// URL reached directly.
func TestHTTP1PoolServesPlainHTTPOnly(t *testing.T) {
	viaProxy := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") }
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	for _, c := range []struct {
		url   string
		proxy func(*http.Request) (*url.URL, error)
		addr  string // "" for no pool
	}{
		{"http://127.0.0.1:8080/mcp", nil, "127.0.0.1:8080"},
		{"http://127.0.0.1:8080/mcp", noProxy, "127.0.0.1:8080"},
		{"http://tools.example/mcp", nil, "tools.example:80"},
		{"http://[::1]/mcp", nil, "[::1]:80"},
		{"http://127.0.0.1:8080/mcp", viaProxy, ""},
		{"https://tools.example/mcp", nil, ""},
		{"http://user:secret@tools.example/mcp", nil, ""},
		{"not a url\x7f", nil, ""},
	} {
		p := newHTTP1Pool(c.url, c.proxy)
		switch {
		case c.addr == "" && p != nil:
			t.Errorf("%q: a pool for %s", c.url, p.addr)
		case c.addr != "" && (p == nil || p.addr != c.addr):
			t.Errorf("%q: pool %+v, want one for %s", c.url, p, c.addr)
		}
	}
}
