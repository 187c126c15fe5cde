package front

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is h served on loopback, behind the front or by net/http alone.
type server struct {
	addr string
	fr   *Server // nil: net/http alone
}

// limits are the http.Server fields a test sets.
type limits struct{ header, read, idle time.Duration }

var defaultLimits = limits{header: 5 * time.Second, read: 10 * time.Second, idle: 10 * time.Second}

// startFront serves h behind the front until the test ends.
func startFront(t testing.TB, h http.Handler, l limits) *server {
	return start(t, h, l, true)
}

// startPlain serves h with net/http alone, the behaviour the front is held
// to.
func startPlain(t testing.TB, h http.Handler, l limits) *server {
	return start(t, h, l, false)
}

func start(t testing.TB, h http.Handler, l limits, front bool) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: l.header, ReadTimeout: l.read, IdleTimeout: l.idle}
	s := &server{addr: ln.Addr().String()}
	served := make(chan error, 1)
	if front {
		s.fr = New(srv, ln)
		go func() { served <- s.fr.Serve() }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	t.Cleanup(func() {
		if s.fr != nil {
			_ = s.fr.Close()
		} else {
			_ = srv.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// client is one connection to a server, read as a client reads it. Its
// methods may be called from a goroutine of the test: they report with
// Errorf, and the caller stops.
type client struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, raw); err != nil {
		c.t.Errorf("sending: %v", err)
	}
}

// answer reads the next answer, whole, to a request of method; nil if
// the connection ended first (or none came in 10 s, which fails the test).
type answer struct {
	resp *http.Response
	body string
}

func (c *client) answer(method string) *answer {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Errorf("no answer in 10 s")
		}
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Errorf("reading the body: %v", err)
		return nil
	}
	return &answer{resp: resp, body: string(b)}
}

// closed reports whether the server closes the connection within d.
func (c *client) closed(d time.Duration) bool {
	c.t.Helper()
	return hubtest.ClosedWithin(c.t, c.c, c.br, d)
}

// post is a keep-alive POST of body to /mcp.
func post(body string) string {
	return "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// within waits for ch, failing the test after d.
func within(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}
