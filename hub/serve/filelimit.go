package serve

import "syscall"

// raiseFileLimit raises the process's soft open-file limit to its hard
// limit and returns the soft limit then in force. Every connection holds
// a descriptor, so the soft limit is what the connection cap is sized by.
// Go's os package already raises it at start on most Unix systems; doing
// it here as well makes the figure the hub reports the one in force, and
// keeps the raise should a build or a parent lower it again.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		want := l
		want.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur, err
		}
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, err
		}
	}
	return l.Cur, nil
}

// connCapFor is the default connection cap for an open-file limit: three
// quarters of it. The quarter held back is for what else the hub opens,
// much of which grows with load as connections do — the data store's
// files, three pipes for each stdio child, outbound connections to remote
// servers (one or more per forwarded call in flight), the log, the
// metrics listener and the answers refusing connections past the cap — so
// a share of the limit rather than a fixed reserve. An unknown limit
// leaves the cap at fallbackMaxConns.
func connCapFor(nofile uint64) int {
	if nofile == 0 || nofile == ^uint64(0) {
		return fallbackMaxConns
	}
	n := nofile / 4 * 3
	if n < 1 {
		return 1
	}
	if n > 1<<30 {
		return 1 << 30
	}
	return int(n)
}

// openFileLimit is the soft open-file limit in force, 0 if unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	return l.Cur
}
