package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/crewlet/hub/servers/atomicfile"
)

// Ledger writes down, in a file of the node's data directory, every
// process of every stdio child the node runs (each known by pid and start
// time, see proc). A node that is stopped stops its children itself and
// the file ends up empty; one killed without a chance to (kill -9, the OOM
// killer) leaves its children's trees running, and OpenLedger, at the
// node's next start, ends every process the file names that still runs
// as the same process. A pid that was handed to another process meanwhile
// is left alone.
//
// A Ledger is safe for concurrent use. It starts no goroutine: each
// child's own watch tells it what changed.
type Ledger struct {
	path  string
	log   *slog.Logger
	boot  string
	owner proc // this process, which the file names as its writer

	mu    sync.Mutex
	trees map[int][]proc // by leader pid
	// last is what the file holds, so an unchanged record is not written
	// again; failed says a write failed, which is logged once.
	last   []byte
	failed bool
}

// ledgerFile is the file's form.
type ledgerFile struct {
	// Boot names the boot the processes ran in (bootID).
	Boot string `json:"boot_id"`
	// Owner is the node process that wrote the record: while it runs,
	// what the record names is its children, not leftovers. A record
	// written before the field existed has none.
	Owner proc `json:"owner"`
	// Trees are each child's processes, its group leader first.
	Trees [][]proc `json:"trees"`
}

// OpenLedger reads what a node that ran on path before left behind, ends
// whatever of it still runs, and returns a ledger that records this node's
// children in the same file. log may be nil. A record whose writer still
// runs (another node on the same data directory, which the directory's
// lock should have stopped first) is refused and left alone: its
// processes are that node's live children.
func OpenLedger(path string, log *slog.Logger) (*Ledger, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self, _, _ := identify(os.Getpid())
	l := &Ledger{path: path, log: log, boot: bootID(), owner: self, trees: map[int][]proc{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading the record of child processes: %w", err)
	default:
		var old ledgerFile
		if err := json.Unmarshal(b, &old); err != nil {
			// A record cut short by a crash names nothing for sure;
			// guessing at it could end a stranger's process.
			log.Warn("child_process_record_unreadable", "path", path, "error", err.Error())
		} else if old.Owner.PID != 0 && old.Owner != self && old.Owner.running() {
			return nil, fmt.Errorf("the record of child processes %s belongs to a node that still runs (pid %d); its processes are not leftovers",
				path, old.Owner.PID)
		} else if old.Boot == l.boot && l.boot != "" {
			l.reapLeftovers(old.Trees)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l, l.write()
}

// reapLeftovers ends every recorded process that still runs as itself: a
// group leader with its whole group, the others one by one (those that
// left the group, and those a group signal would miss because their leader
// is gone). Each is killed outright: the node that could have asked it
// gently is gone, and so is whatever it was serving.
func (l *Ledger) reapLeftovers(trees [][]proc) {
	var ended []int
	var all []proc
	for _, t := range trees {
		for i, p := range t {
			now, st, ok := identify(p.PID)
			if !ok || now != p {
				continue
			}
			if i == 0 && st.pgid == p.PID {
				_ = syscall.Kill(-p.PID, syscall.SIGKILL)
			}
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			ended = append(ended, p.PID)
			all = append(all, p)
		}
	}
	if len(ended) == 0 {
		return
	}
	// They are not this process's children, so nothing tells of their
	// end but /proc: look until they are gone, boundedly.
	deadline := time.Now().Add(2 * time.Second)
	for slices.ContainsFunc(all, proc.running) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	l.log.Warn("leftover_processes_reaped", "path", l.path, "pids", ended,
		"reason", "a previous run of this node ended without stopping its MCP servers' processes")
}

// record sets what is known of one child's tree (leader first).
func (l *Ledger) record(procs []proc) {
	if l == nil || len(procs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trees[procs[0].PID] = procs
	_ = l.write()
}

// forget drops a child whose tree has been stopped.
func (l *Ledger) forget(leader int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.trees, leader)
	_ = l.write()
}

// write replaces the file with the record, atomically (a crash mid-write
// leaves the old record or the new, never half of one); l.mu is held.
func (l *Ledger) write() error {
	f := ledgerFile{Boot: l.boot, Owner: l.owner, Trees: [][]proc{}}
	for _, leader := range slices.Sorted(maps.Keys(l.trees)) {
		f.Trees = append(f.Trees, l.trees[leader])
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if slices.Equal(b, l.last) {
		return nil
	}
	if err = atomicfile.Write(l.path, b, 0o600); err != nil {
		if !l.failed {
			l.log.Error("child_process_record_failed", "path", l.path, "error", err.Error())
		}
		l.failed = true
		return fmt.Errorf("recording child processes: %w", err)
	}
	l.last, l.failed = b, false
	return nil
}
