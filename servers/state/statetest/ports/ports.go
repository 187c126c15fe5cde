// Package ports hands a test a loopback port for a listener that must be
// named before it is bound: a fleet node's route listener, which its peers
// dial, or a child process's --listen. It imports nothing of ours.
//
// Finding a free port by listening on port 0 and closing the listener is
// not enough: that port is in the kernel's ephemeral range, which the
// kernel hands to the next listener on port 0 and the next outgoing
// connection of any process on the machine. On a busy machine one of them
// takes it before the node binds it, and the node cannot listen. A port
// Reserve answers is below that range, where the kernel hands out nothing
// of its own accord, and it is held by a lock every test process on the
// machine takes before it answers a port (an exclusive flock of a file
// named for the port), until the test that reserved it ends.
package ports

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// floor is the lowest port Reserve answers: above the ports services on a
// machine are usually given.
const floor = 16384

// Reserve answers a loopback port nobody listens on and no other test
// holds; the test holds it until it ends.
func Reserve(tb testing.TB) int {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "crewlet-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		tb.Fatalf("ports: %v", err)
	}
	lo, hi := floor, ephemeralLow()
	start := rand.IntN(hi - lo)
	for i := range hi - lo {
		port := lo + (start+i)%(hi-lo)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			tb.Fatalf("ports: %v", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close() // another test holds it
			continue
		}
		// Held by nobody of ours; something else may listen there.
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close()
			continue
		}
		_ = ln.Close()
		// The lock goes with the file: closed when the test ends, or
		// when its process does.
		tb.Cleanup(func() { _ = f.Close() })
		return port
	}
	tb.Fatalf("ports: every port from %d to %d is taken", lo, hi-1)
	return 0
}

// Addr is Reserve's port as a loopback host:port.
func Addr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Reserve(tb)))
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux
// says it in /proc; 32768 elsewhere, below the range macOS and the BSDs
// use), never below floor+1024 so Reserve has ports to choose from.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	return max(low, floor+1024)
}
