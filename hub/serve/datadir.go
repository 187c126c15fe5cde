package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in the data directory whose lock says a node runs
// on it.
const lockFile = "serve.lock"

// dataDirLock is a node's hold on its data directory.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock, or says which node holds
// it. It is the first thing a node does to an existing data directory:
// before it reaps what a dead run left (a live node's children are not
// leftovers) and before it opens the state (whose own locks would refuse
// a second node only after the damage). The lock is the kernel's (flock),
// so a node killed outright leaves none behind; the file keeps the pid of
// the node that holds it, for the sentence.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("another crewlet serve is running on data directory %s (%s): stop it first, or give this one its own --data-dir",
				dir, holder)
		}
		return nil, fmt.Errorf("locking the data directory: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release lets the directory go; nil-safe. The file stays: removing it
// would let a node starting now lock a file the next one no longer sees.
func (l *dataDirLock) release() {
	if l != nil {
		_ = l.f.Close()
	}
}
