package serve

import "syscall"

// raiseFileLimit raises the process's soft open-file limit to its hard
// limit and returns the soft limit then in force. Every connection holds
// a descriptor, so the soft limit is what the connection cap is sized by.
//
// Go's syscall package already raises it at start, to one below the hard
// limit, and hands a child it starts the original soft limit again (a
// child using select(2), or closing every descriptor up to the limit,
// needs the small one). Any call to Setrlimit ends that hand-back for
// good, so a limit Go has raised is left as it is: the one descriptor
// below the hard limit is not worth every stdio child's limit. Only where
// Go did not raise it (it could not read it, say) is it raised here.
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur+1 < l.Max {
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
