package serve

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// A connection past the cap is answered, not queued. Each answer holds its
// descriptor and a goroutine for at most overflowDeadline, and no more
// than overflowInFlight are in flight: past that a connection is closed
// at once (its client sees the connection end, as a flood deserves).
const (
	overflowInFlight = 16
	// overflowDeadline bounds one answer whole: the TLS handshake, the
	// client's request head, the 503 and the wait for the client to close.
	overflowDeadline = 5 * time.Second
	// overflowRetryAfter is the Retry-After of the 503, in seconds: long
	// enough not to invite a tight retry loop, short against a session.
	overflowRetryAfter = 5
)

// refuse answers c, a connection past the cap, without waiting for it.
func (l *limitListener) refuse(c net.Conn) {
	select {
	case l.overflow <- struct{}{}:
	default:
		c.Close()
		return
	}
	var cfg *tls.Config
	if l.tlsConfig != nil {
		cfg = l.tlsConfig()
	}
	go func() {
		defer func() { <-l.overflow }()
		answerOverCap(c, cap(l.sem), cfg, l.answerWithin)
	}()
}

// answerOverCap reads the request head on c (so the client is waiting for
// an answer, not still writing, and its bytes are not left unread), writes
// a 503 naming the cap, and ends the connection as net/http ends one it
// will not read further: a FIN, then the client's remaining bytes read and
// dropped until it closes or the deadline passes — so the kernel sends no
// reset that could cost the client the answer. Over HTTPS it shakes hands
// first, offering HTTP/1.1 alone so the 503 is one every client reads.
func answerOverCap(c net.Conn, n int, cfg *tls.Config, within time.Duration) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(within))
	rw := c
	var tc *tls.Conn
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		tc = tls.Server(c, cfg)
		if tc.Handshake() != nil {
			return
		}
		rw = tc
	}
	br := bufio.NewReader(io.LimitReader(rw, maxHeaderBytes))
	if _, err := http.ReadRequest(br); err != nil {
		return
	}
	body := fmt.Sprintf("This hub serves at most %s at once and all are in use; try again in %d s. "+
		"The operator raises the cap with crewlet serve --max-conns N (by default it is three quarters of the open-file limit).\n",
		count(n, "connection", "connections"), overflowRetryAfter)
	fmt.Fprintf(rw, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", overflowRetryAfter, len(body), body)
	if tc != nil {
		_ = tc.CloseWrite() // close_notify; the TCP FIN follows
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, c)
}
