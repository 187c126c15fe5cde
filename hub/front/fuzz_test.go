package front

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzFront sends any bytes as a client's whole input, to the front and
// to net/http alone serving the same handler, and holds the front to
// answering exactly what net/http answers: the same answers, in the same
// order, with the same statuses and bodies. A request the front answers
// wrongly, one it hands over after consuming part of it, or input that
// makes it fall over, all show here. Its seeds run as a plain test.
func FuzzFront(f *testing.F) {
	for _, seed := range []string{
		post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		post("one") + post("two"),
		post("one") + "\r\n" + post("after a stray line break"),
		"GET /mcp HTTP/1.1\r\nHost: hub.test\r\n\r\n" + post("after a GET"),
		"DELETE /mcp HTTP/1.1\r\nHost: hub.test\r\nMcp-Session-Id: x\r\n\r\n",
		post("x") + "HEAD /mcp HTTP/1.1\r\nHost: hub.test\r\n\r\n" + post("y"),
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 10\r\n\r\nshort",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
		"POST /mcp HTTP/1.1\nHost: hub.test\nContent-Length: 2\n\nhi",
		"\r\nPOST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\n\r\nhi",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\n Folded: x\r\nContent-Length: 2\r\n\r\nhi",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\nX: a\x00b\r\n\r\nhi",
		"POST /m%zz HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 0\r\n\r\n",
		"POST * HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 0\r\n\r\n",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: +2\r\n\r\nhi",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nhi",
		"POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\n\r\nhiGARBAGE\r\n\r\n",
		"",
		"POST",
	} {
		f.Add([]byte(seed))
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q %v", r.Method, r.URL.Path, body, err != nil)
	})
	fr, plain := startFront(f, h, defaultLimits), startPlain(f, h, defaultLimits)
	f.Fuzz(func(t *testing.T, in []byte) {
		got, want := exchange(t, fr.addr, in), exchange(t, plain.addr, in)
		if got != want {
			t.Fatalf("for %q\nthe front answers:\n%s\nnet/http answers:\n%s", in, got, want)
		}
	})
}

// exchange sends in, then ends the client's side, and describes every
// answer read until the server closes the connection.
func exchange(t *testing.T, addr string, in []byte) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The servers may close before reading all of it; what they answered
	// is what is compared.
	_, _ = c.Write(in)
	_ = c.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(c)
	var b strings.Builder
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no end to the answers in 10 s (read so far: %s)", b.String())
			}
			return b.String()
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&b, "%d %q (body complete: %v)\n", resp.StatusCode, body, err == nil)
	}
}
