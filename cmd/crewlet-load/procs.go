package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child this command started, in its own process group so that
// whatever it starts beneath it can be signalled with it, and so that a
// terminal's Ctrl-C reaches only this command, which then stops it in order.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the group to end with SIGTERM (the hub then stops its own
// children), and kills the group if it has not ended within grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "crewlet-load: %s did not stop within %s of SIGTERM; killing its process group\n", p.name, grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything left in the group (a grandchild that ignored the signal)
	// goes too; ESRCH when the group is already empty is the normal case.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// childGroups lists the process groups led by pid's direct children: a stdio
// child of the hub runs in its own group, which the hub's group signal does
// not reach. They are ours to reap if the hub itself could not.
func childGroups(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(s)
			if err != nil {
				continue
			}
			if g, err := syscall.Getpgid(n); err == nil && g == n {
				out = append(out, n)
			}
		}
	}
	return out
}

// firstLine reads r until a line with prefix, bounded by timeout, then keeps
// draining r so the child never blocks on a full pipe.
func firstLine(r io.Reader, prefix string, timeout time.Duration, died <-chan struct{}) (string, error) {
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		found := false
		for sc.Scan() {
			if !found && strings.HasPrefix(sc.Text(), prefix) {
				found = true
				lines <- strings.TrimSpace(strings.TrimPrefix(sc.Text(), prefix))
			}
		}
	}()
	select {
	case l := <-lines:
		return l, nil
	case <-died:
		return "", errors.New("it exited before saying where it listens")
	case <-time.After(timeout):
		return "", fmt.Errorf("no %q line within %s", prefix, timeout)
	}
}

// startServer starts self with args, a command that serves HTTP and prints
// "listening ADDR" first (echo-server --http, relay), and answers the
// address it listens on.
func startServer(name, self string, args ...string) (*proc, string, error) {
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc(name, cmd)
	if err != nil {
		return nil, "", err
	}
	addr, err := firstLine(out, "listening ", 10*time.Second, p.done)
	if err != nil {
		p.stop(5 * time.Second)
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return p, addr, nil
}
