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
// named for the port), until the test that reserved it ends. The test's
// end removes the file too, so the directory holds the ports held now
// rather than every port a test ever tried.
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
		path := filepath.Join(dir, strconv.Itoa(port))
		f, held, err := lock(path)
		if err != nil {
			tb.Fatalf("ports: %v", err)
		}
		if !held {
			continue // another test holds it
		}
		// Held by nobody of ours; something else may listen there.
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			release(f, path)
			continue
		}
		_ = ln.Close()
		// The lock goes with the file: released when the test ends, or
		// when its process does (a killed process leaves its file, which
		// the next test to lock it uses or removes).
		tb.Cleanup(func() { release(f, path) })
		return port
	}
	tb.Fatalf("ports: every port from %d to %d is taken", lo, hi-1)
	return 0
}

// lock takes the lock file at path, creating it; held false when
// another test holds it. A file removed by its holder between this open
// and this lock (release) is no longer the port's lock, whoever created
// the path's file since: the lock is taken again on what the path names
// now.
func lock(path string) (f *os.File, held bool, err error) {
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, false, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close()
			return nil, false, nil
		}
		if named(f, path) {
			return f, true, nil
		}
		_ = f.Close()
	}
}

// named reports whether path still names f's file.
func named(f *os.File, path string) bool {
	have, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(have, now)
}

// release removes a lock file and lets go of its lock, in that order: the
// path is gone before anybody can take the lock, and whoever opened the
// file before it went sees it is no longer named (lock).
func release(f *os.File, path string) {
	_ = os.Remove(path)
	_ = f.Close()
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
