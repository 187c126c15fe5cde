package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The limits a run can be stopped for or run into, as Result names them.
const (
	LimitWall      = "wall"
	LimitOutput    = "output"
	LimitCancelled = "cancelled"
	LimitCPU       = "cpu"
	LimitMemory    = "memory"
	LimitProcesses = "processes"
	LimitFileSize  = "file_size"
	LimitDisk      = "disk"
	LimitFiles     = "files"
)

// Result is how one command in the box ended and what it wrote.
type Result struct {
	// Exit is the command's exit status; 128+n when signal n ended it;
	// -1 when the box killed it (Killed says why).
	Exit int
	// Killed is why the box stopped the command: LimitWall, LimitOutput
	// or LimitCancelled; empty when it ended on its own.
	Killed string
	// Reached lists the kernel-held limits the command ran into, each
	// refused to it rather than waited for: LimitCPU, LimitMemory,
	// LimitProcesses, LimitFileSize. A command may go on after one (a
	// failed fork), or end of it.
	Reached []string
	// Why says Killed and Reached in words, with their numbers; empty
	// when neither is set.
	Why string
	// Transcript is the output stream as whole lines: its first 64 KiB
	// and last 192 KiB, the middle between them counted in a line of
	// its own, and a last line the box stopped the stream inside said
	// after the tail (TranscriptLinesLeftOut, TranscriptBytesLeftOut
	// count both).
	Transcript             string
	TranscriptLinesLeftOut int64
	TranscriptBytesLeftOut int64
	// Stderr is the error stream's last 2 MiB, its unread start said by
	// size (StderrBytesLeftOut).
	Stderr             string
	StderrBytesLeftOut int64
	// OutputBytes counts both streams together, up to the output limit:
	// the count stops where the command was stopped.
	OutputBytes int64
	Duration    time.Duration
}

// Run runs argv in the box, in the workspace, with stdin (nil for none),
// and waits until it and everything it started have ended. The command is
// held to the box's limits; one that reaches the wall or output limit, or
// whose ctx ends, is killed whole — its process group, its pid namespace
// and every process the box's cgroup holds — before Run returns. The error
// is the box's own failure (it could not start, it was removed); how the
// command ended, including a killed one, is in the Result.
func (b *Box) Run(ctx context.Context, argv []string, stdin io.Reader) (Result, error) {
	return b.run(ctx, argv, stdin, runOptions{})
}

// runOptions are what the box's own uses of a run add to Run.
type runOptions struct {
	// raw, when set, is handed the output stream whole as well as the
	// transcript: a listing or log the box reads, or a CLI's events.
	raw io.Writer
	// env is laid over the box's environment for this run.
	env []string
	// internal marks a run of the box's own (a listing, the
	// repository's log), which leaves nothing in the workspace to count.
	internal bool
}

// run is Run with opts.
func (b *Box) run(ctx context.Context, argv []string, stdin io.Reader, opts runOptions) (Result, error) {
	if len(argv) == 0 {
		return Result{}, errors.New("no command to run")
	}
	b.runs.Lock()
	defer b.runs.Unlock()
	if b.isClosed() {
		return Result{}, errClosed
	}
	l := b.cfg.Limits
	before := b.cg.counters()

	cmd := exec.Command("/bin/sh", b.launcher(argv)...)
	cmd.Env = append(append([]string(nil), b.env...), opts.env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	// A kill may be asked for before the process group exists (the
	// output limit, met as soon as the copying starts): it is then sent
	// as the group is known.
	var killMu sync.Mutex
	pgid, killed := 0, ""
	kill := func(why string) {
		killMu.Lock()
		defer killMu.Unlock()
		if killed != "" {
			return
		}
		killed = why
		if pgid != 0 {
			killGroup(pgid)
		}
	}
	out := &streams{stdout: newTranscript(TranscriptHead, TranscriptTail), stderr: &tailBuffer{max: StderrTail},
		max: int64(l.OutputMB) << 20, raw: opts.raw, onFull: func() { kill(LimitOutput) }}
	cmd.Stdout = out.writer(false)
	cmd.Stderr = out.writer(true)
	// The pipes close once every process holding them has died; the
	// kills below see to that, and this bounds a process the kills
	// could not reach.
	cmd.WaitDelay = drainBound

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("the box could not start: %w", err)
	}
	killMu.Lock()
	pgid = cmd.Process.Pid
	if killed != "" {
		killGroup(pgid)
	}
	killMu.Unlock()
	b.mu.Lock()
	b.active[pgid] = true
	if b.closed {
		// Close came between the check above and now, and could not
		// see this run to kill it.
		killGroup(pgid)
	}
	b.mu.Unlock()

	wall := time.AfterFunc(l.Wall, func() { kill(LimitWall) })
	stop := context.AfterFunc(ctx, func() { kill(LimitCancelled) })
	waitErr := cmd.Wait()
	wall.Stop()
	stop()
	// The namespace dies with bwrap; whatever the cgroup still holds
	// (a process on its way out) is killed and waited for, so nothing of
	// this run outlives it.
	killGroup(pgid)
	drainErr := b.cg.drain()
	b.mu.Lock()
	delete(b.active, pgid)
	b.mu.Unlock()

	killMu.Lock()
	why := killed
	killMu.Unlock()
	out.mu.Lock()
	out.stdout.finish()
	res := Result{
		Killed:             why,
		Transcript:         out.stdout.String(),
		Stderr:             out.stderr.String(),
		StderrBytesLeftOut: out.stderr.dropped,
		OutputBytes:        out.total,
		Duration:           time.Since(start),
	}
	res.TranscriptLinesLeftOut, res.TranscriptBytesLeftOut = out.stdout.leftOut()
	out.mu.Unlock()
	res.Exit = exitStatus(cmd.ProcessState, waitErr)
	if res.Killed != "" {
		res.Exit = -1
	}
	res.Reached = b.reached(before, res.Exit)
	var uncounted error
	if !opts.internal {
		// What the run left in the workspace counts against the box's
		// disk and file limits (the box's own listings add nothing). A
		// workspace that cannot be counted is held as past both: it
		// is the run's doing, and the limits must not be escaped by it.
		u, err := b.DiskUsage()
		switch {
		case err != nil:
			uncounted = err
			res.Reached = append(res.Reached, LimitDisk, LimitFiles)
		default:
			if u.Bytes > int64(l.DiskMB)<<20 {
				res.Reached = append(res.Reached, LimitDisk)
			}
			if u.Files > l.Files {
				res.Reached = append(res.Reached, LimitFiles)
			}
		}
	}
	res.Why = explain(res, l, uncounted)
	if drainErr != nil {
		return res, drainErr
	}
	if b.isClosed() && res.Killed == "" {
		return res, errClosed
	}
	return res, nil
}

// launcher is /bin/sh's arguments: a script that enters the box's cgroups
// and then becomes prlimit, which sets the rlimits and becomes bwrap. The
// cgroups are entered before bwrap forks anything, so no process of the
// box is ever outside them.
func (b *Box) launcher(argv []string) []string {
	const script = `n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done
exec "$@"`
	procs := b.cg.procsFiles()
	args := []string{"-c", script, "sh", strconv.Itoa(len(procs))}
	args = append(args, procs...)
	args = append(args, b.prlimit)
	args = append(args, b.rlimits()...)
	args = append(args, "--", b.bwrap)
	args = append(args, b.bwrapArgs()...)
	args = append(args, "--")
	return append(args, argv...)
}

// rlimits are prlimit's flags for the box's limits. CPU time has a soft
// limit (SIGXCPU, which a program may catch to say so) and a hard one five
// seconds on (SIGKILL).
func (b *Box) rlimits() []string {
	l := b.cfg.Limits
	// Where a memory group holds the box's memory, it is the limit a
	// run meets and is told of; the address space is then only a
	// backstop against a wild reservation, wide enough for a runtime
	// that reserves far more than it uses (V8, Go). Without the group,
	// the address space is the memory limit.
	as := int64(l.MemoryMB) << 20
	if b.cg.memory != "" {
		as *= 4
	}
	args := []string{
		fmt.Sprintf("--cpu=%d:%d", l.CPUSeconds, l.CPUSeconds+5),
		fmt.Sprintf("--as=%d", as),
		fmt.Sprintf("--fsize=%d", int64(l.FileMB)<<20),
		"--core=0",
	}
	if b.cg.pids == "" {
		// Without a pids group the per-user count stands in: it counts
		// every process of the hub's user, so the box's share is added
		// to what that user runs now.
		args = append(args, fmt.Sprintf("--nproc=%d", l.Processes+userTasks()))
	}
	return args
}

// userTasks counts the tasks the hub's user runs now, for the per-user
// process rlimit.
func userTasks() int {
	uid := uint32(os.Getuid())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid {
			continue
		}
		if tasks, err := os.ReadDir("/proc/" + e.Name() + "/task"); err == nil {
			n += len(tasks)
		}
	}
	return n
}

// killGroup kills a run's process group: the launcher, which became bwrap,
// and with it (--die-with-parent) the box's pid namespace.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// exitStatus is a finished command's status as a shell would say it.
func exitStatus(ps interface{ Sys() any }, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
	if err != nil {
		return -1
	}
	return 0
}

// reached is what the kernel held the run to: the cgroups' counters moved
// since the run began, and the signals the rlimits are enforced by, as
// the command's own status carries them (bwrap passes 128+n through).
func (b *Box) reached(before counters, exit int) []string {
	var out []string
	after := b.cg.counters()
	switch exit {
	case 128 + int(syscall.SIGXCPU):
		out = append(out, LimitCPU)
	case 128 + int(syscall.SIGXFSZ):
		out = append(out, LimitFileSize)
	}
	if after.memFail > before.memFail {
		out = append(out, LimitMemory)
	}
	if after.pidsMax > before.pidsMax {
		out = append(out, LimitProcesses)
	}
	return out
}

// explain says a Result's Killed and Reached in words, with their numbers;
// uncounted is why the workspace could not be counted, if it could not.
func explain(r Result, l Limits, uncounted error) string {
	var parts []string
	switch r.Killed {
	case LimitWall:
		parts = append(parts, fmt.Sprintf("stopped at the wall-time limit of %s", l.Wall))
	case LimitOutput:
		parts = append(parts, fmt.Sprintf("stopped after writing more than the output limit of %d MiB", l.OutputMB))
	case LimitCancelled:
		parts = append(parts, "stopped because its run ended")
	}
	for _, lim := range r.Reached {
		switch lim {
		case LimitCPU:
			parts = append(parts, fmt.Sprintf("ran into the CPU limit of %d seconds", l.CPUSeconds))
		case LimitFileSize:
			parts = append(parts, fmt.Sprintf("ran into the file-size limit of %d MiB", l.FileMB))
		case LimitMemory:
			parts = append(parts, fmt.Sprintf("ran into the memory limit of %d MiB", l.MemoryMB))
		case LimitProcesses:
			parts = append(parts, fmt.Sprintf("ran into the limit of %d processes", l.Processes))
		case LimitDisk:
			if uncounted != nil {
				parts = append(parts, uncountedWords(uncounted, l))
				continue
			}
			parts = append(parts, fmt.Sprintf("left the workspace past its disk limit of %d MiB", l.DiskMB))
		case LimitFiles:
			if uncounted != nil {
				continue // said with the disk limit
			}
			parts = append(parts, fmt.Sprintf("left the workspace holding more than its limit of %d files", l.Files))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the command " + strings.Join(parts, "; ")
}

// uncountedWords says a workspace that could not be counted, and that it is
// held as past its limits.
func uncountedWords(err error, l Limits) string {
	return fmt.Sprintf("left a workspace that cannot be counted (%v), so it is held as past its disk limit of %d MiB and its limit of %d files", err, l.DiskMB, l.Files)
}

// streams counts a run's two streams together against the output limit.
type streams struct {
	mu     sync.Mutex
	stdout *transcript
	stderr *tailBuffer
	raw    io.Writer
	total  int64
	max    int64
	onFull func()
	full   bool
}

type streamWriter struct {
	s      *streams
	stderr bool
}

func (s *streams) writer(stderr bool) io.Writer { return streamWriter{s, stderr} }

func (w streamWriter) Write(p []byte) (int, error) {
	n := len(p) // always all of it: a short write would stop the copy and hold the writer
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full {
		return n, nil
	}
	if room := s.max - s.total; int64(len(p)) > room {
		p = p[:room]
		s.full = true
	}
	s.total += int64(len(p))
	if w.stderr {
		_, _ = s.stderr.Write(p)
	} else {
		_, _ = s.stdout.Write(p)
		if s.raw != nil {
			_, _ = s.raw.Write(p)
		}
	}
	if s.full {
		// The line the limit cut is not kept as if it were whole.
		s.stdout.dropPartial()
		if s.onFull != nil {
			go s.onFull()
		}
	}
	return n, nil
}
