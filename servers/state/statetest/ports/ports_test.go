package ports

import (
	"net"
	"strconv"
	"testing"
)

// A reserved port is below the kernel's ephemeral range, so no listener
// on port 0 and no outgoing connection is handed it, and it is free.
func TestReservedPortIsBelowTheEphemeralRange(t *testing.T) {
	for range 20 {
		p := Reserve(t)
		if p < floor || p >= ephemeralLow() {
			t.Fatalf("reserved %d, outside [%d, %d)", p, floor, ephemeralLow())
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("the reserved port %d cannot be listened on: %v", p, err)
		}
		_ = ln.Close()
	}
}

// No port is answered twice while a test holds it, whatever the random
// choice: without the lock, 400 draws from the range would almost surely
// repeat one.
func TestReservedPortIsNotAnsweredTwice(t *testing.T) {
	held := map[int]bool{}
	for range 400 {
		p := Reserve(t)
		if held[p] {
			t.Fatalf("port %d answered twice while held", p)
		}
		held[p] = true
	}
}
