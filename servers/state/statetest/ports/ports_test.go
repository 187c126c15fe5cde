package ports

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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

// A test's end removes the lock file of the port it held, so the
// directory does not gather a file for every port ever reserved; and a
// test that opened the file before it was removed does not take the port
// by locking it once it is released, since the file is no longer the
// port's lock.
func TestReservedPortsLockFileGoesWithTheTest(t *testing.T) {
	var path string
	var stale *os.File
	t.Run("holds", func(t *testing.T) {
		path = filepath.Join(os.TempDir(), "crewlet-test-ports", strconv.Itoa(Reserve(t)))
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the held port has no lock file: %v", err)
		}
		var err error
		if stale, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
	})
	defer stale.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the lock file outlived its test: %v", err)
	}
	// The late opener gets the lock of a file nobody names any more; the
	// lock the port's path names is still to be had, once.
	if err := syscall.Flock(int(stale.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil || named(stale, path) {
		t.Fatalf("the removed file: lock %v, still named %v", err, named(stale, path))
	}
	f, held, err := lock(path)
	if err != nil || !held {
		t.Fatalf("the port's lock after its release: held %v, %v", held, err)
	}
	defer release(f, path)
	if _, again, _ := lock(path); again {
		t.Fatal("the port's lock was taken twice")
	}
}
