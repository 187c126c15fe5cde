package hubtest

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// ClosedWithin reports whether the server closes c within d: a read from r
// (c itself, or the reader a test has been reading c through) that ends in
// EOF or a reset rather than in the test's own deadline.
func ClosedWithin(t testing.TB, c net.Conn, r io.Reader, d time.Duration) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 512)
	for {
		_, err := r.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
			continue
		case errors.As(err, &ne) && ne.Timeout():
			return false
		default:
			return true
		}
	}
}
