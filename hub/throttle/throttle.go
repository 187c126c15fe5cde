// Package throttle slows wrong credentials down, for the operator API and
// the screen's sign-in alike, by one rule: failures are slowed, not
// callers.
//
// Credentials (credential.go) holds it: a credential is always checked
// first, one that verifies is never refused, and only failures are
// counted, per source address and credential digest with a ceiling per
// source, so a client that keeps sending a stale token slows only that
// token, never a neighbour behind the same address, while a guesser
// trying one credential after another meets the ceiling. The hub keeps
// one counter for both surfaces, so alternating them gains a guesser
// nothing.
//
// It is safe for concurrent use and owns no goroutine.
package throttle

import (
	"net"
	"net/http"
)

// maxSources bounds how many keys a counter remembers. Past it, the keys
// whose buckets are full again (nothing to remember) are dropped, and if
// that frees nothing, every key is: a flood from that many addresses
// resets the slowdown rather than the hub's memory.
const maxSources = 10000

// Source is the address a request comes from, as the connection says:
// never a header a client writes, which would let a guesser pick a fresh
// source for each try.
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
