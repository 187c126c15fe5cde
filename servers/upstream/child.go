package upstream

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a stdio server's process tree. The server runs in its own process
// group, so signals reach whatever a launcher (npx, uvx) started beneath it:
// killing only the pid would leave a grandchild holding the credentials and
// the pipes.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	tail   *lineTail
	done   chan struct{} // closed when the process has been waited for
	err    error         // the wait result; read only after done
	start  time.Time
	// tree is what has been seen below the leader; ledger, if any, writes
	// it down. The watch goroutine walks the tree every so often until
	// quit is closed, and closes watched when it has ended.
	tree    *tree
	ledger  *Ledger
	quit    chan struct{}
	watched chan struct{}

	stopOnce sync.Once
}

// treeWatch says how a child's process tree is kept track of.
type treeWatch struct {
	ledger *Ledger       // nil: nothing is written down
	every  time.Duration // how often the tree is walked
}

// startChild spawns command with exactly env (never the engine's own
// environment) in dir. Every stderr line goes to onLine and is kept in a
// bounded tail of whole lines for diagnostics.
func startChild(command string, args, env []string, dir string, onLine func(string), watch treeWatch) (*child, error) {
	cmd := exec.Command(command, args...)
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Plain os.Pipes rather than exec's pipe helpers: Wait must not close
	// our ends under the SDK's reader, and the death watch comes from Wait,
	// not from the pipes (a grandchild may hold them open).
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	c := &child{cmd: cmd, stdin: inW, stdout: outR, tail: newLineTail(40, 16<<10), done: make(chan struct{})}
	startErr := cmd.Start()
	// The child holds its own copies now; ours would keep the pipes open
	// after it exits.
	inR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, startErr
	}
	stderr := errR
	c.start = time.Now()
	leader, _, ok := identify(cmd.Process.Pid)
	if !ok {
		// Gone already: it is known by pid alone, which no signal of
		// its tree's will be sent to.
		leader = proc{PID: cmd.Process.Pid}
	}
	c.tree, c.ledger = newTree(leader), watch.ledger
	c.quit, c.watched = make(chan struct{}), make(chan struct{})
	c.ledger.record(c.tree.procs())
	go c.watch(watch.every)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		defer stderr.Close()
		// Read to the end, whatever comes: giving up would close the
		// pipe under a child that is still writing to it.
		readLines(stderr, maxStderrLine, func(line string) {
			c.tail.add(line)
			if onLine != nil {
				onLine(line)
			}
		})
	}()
	go func() {
		c.err = cmd.Wait()
		// The last stderr lines explain a crash: give the reader a moment
		// to drain them before the death is reported. A grandchild still
		// holding stderr must not hold up the report.
		select {
		case <-stderrDone:
		case <-time.After(200 * time.Millisecond):
		}
		close(c.done)
	}()
	return c, nil
}

// pid of the group leader.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports how the process ended, for a sentence: "exit status 2",
// "killed by signal 9".
func (c *child) exitDescription() string {
	var ee *exec.ExitError
	switch {
	case c.err == nil:
		return "exited with status 0"
	case errors.As(c.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	default:
		return c.err.Error()
	}
}

// stop ends the tree gently, then firmly: close stdin (a well-behaved server
// exits on EOF), then SIGTERM to the group, then SIGKILL to the group. The
// group is signalled even after the leader exited, since a grandchild may
// outlive it, and so is every process seen below the leader that left the
// group. The child counts as stopped only once all of them are gone, so a
// restart never runs beside what the old one left behind.
func (c *child) stop(grace time.Duration) {
	c.stopOnce.Do(func() {
		close(c.quit)
		<-c.watched
		// A last look while the leader, if it still runs, holds its tree
		// together: what it started since the last walk is stopped too.
		c.look()
		_ = c.stdin.Close()
		if !c.waitFor(grace) {
			c.kill(syscall.SIGTERM)
			if !c.waitFor(grace) {
				c.kill(syscall.SIGKILL)
				<-c.done
			}
		}
		// The leader is gone; what it left, in its group or not, goes now.
		c.kill(syscall.SIGKILL)
		c.tree.waitGone(grace)
		c.ledger.forget(c.tree.leader.PID)
	})
}

// kill signals the group and every process seen below the leader.
func (c *child) kill(sig syscall.Signal) {
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	c.tree.signal(sig)
}

// look walks the tree now and writes down what changed.
func (c *child) look() {
	if c.tree.observe() {
		c.ledger.record(c.tree.procs())
	}
}

// watch walks the tree every so often until the child is stopped: a
// process that detaches from the group must have been seen before its
// parent dies, or nothing would lead to it.
func (c *child) watch(every time.Duration) {
	defer close(c.watched)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			c.look()
		}
	}
}

func (c *child) waitFor(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// lineTail keeps the last whole lines of a stream within a line count and a
// byte budget, counting what it let go, so a tail says what it left out
// rather than cutting a line in half.
type lineTail struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	lines    []string
	bytes    int
	dropped  int
}

func newLineTail(max, maxBytes int) *lineTail { return &lineTail{max: max, maxBytes: maxBytes} }

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.bytes += len(line)
	for len(t.lines) > t.max || (t.bytes > t.maxBytes && len(t.lines) > 1) {
		t.bytes -= len(t.lines[0])
		t.lines = t.lines[1:]
		t.dropped++
	}
}

// String renders the tail, saying how many earlier lines it left out.
func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.lines, "\n")
	if t.dropped > 0 {
		s = fmt.Sprintf("[%d earlier lines not kept]\n%s", t.dropped, s)
	}
	return s
}
