package hub

import (
	"log"
	"log/slog"
	"strings"
)

// ServerErrorLog is the logger an http.Server serving the hub writes its
// own errors to (a failed TLS handshake, an error accepting a connection,
// a handler's panic): each becomes one of the hub's JSON lines, where the
// standard library would print a plain line into a log of JSON lines. A
// failed TLS handshake is anyone's to cause, as often as they like (a port
// scanner, a plain HTTP request to the HTTPS port), so like a refused
// request each kind is logged at most once per refusalLogEvery, the next
// line saying how many were left out meanwhile.
func ServerErrorLog(l *slog.Logger) *log.Logger {
	return log.New(serverErrors{newRefusalLog(l, refusalLogEvery)}, "", 0)
}

// serverErrors turns the lines net/http writes into the hub's events.
type serverErrors struct{ refusals *refusalLog }

// tlsHandshakePrefix starts the line net/http writes for a failed TLS
// handshake: the remote address, ": ", the error.
const tlsHandshakePrefix = "http: TLS handshake error from "

func (s serverErrors) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if rest, ok := strings.CutPrefix(line, tlsHandshakePrefix); ok {
		remote, cause, _ := strings.Cut(rest, ": ")
		s.refusals.note(slog.LevelWarn, "tls_handshake_failed", "tls handshake failed", "remote", remote, "error", clip(cause))
		return len(p), nil
	}
	s.refusals.note(slog.LevelError, "http_server_error", "http server error", "error", line)
	return len(p), nil
}
