package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The runtimes and network modes a box may be configured with.
const (
	RuntimeBubblewrap = "bubblewrap"
	NetworkNone       = "none"
	NetworkHost       = "host"
)

// The coding CLIs a box can run besides the builtin agent (cli.go).
var CLIs = []string{"opencode"}

// Limits bound every command run in a box and the box itself. A zero field
// takes its default (WithDefaults), so the zero value is a usable box.
type Limits struct {
	// Wall is how long one command may run, by the clock (default 30 min).
	Wall time.Duration
	// CPUSeconds is the CPU time one process may use (RLIMIT_CPU,
	// default 600).
	CPUSeconds int
	// MemoryMB bounds the box's memory together where the machine
	// offers a memory cgroup (each process's address space then at four
	// times it), else each process's address space (RLIMIT_AS); default
	// 2048.
	MemoryMB int
	// Processes is how many processes the box may hold at once, each
	// thread counted as the kernel counts it: a pids cgroup where
	// offered, else the per-user RLIMIT_NPROC (default 256).
	Processes int
	// FileMB is the largest file a process may write (RLIMIT_FSIZE,
	// default 256).
	FileMB int
	// Files is how many files and directories the workspace may hold
	// (default 20000); DiskUsage counts them.
	Files int
	// DiskMB is how much the workspace may hold on disk (default 2048);
	// DiskUsage counts it.
	DiskMB int
	// OutputMB is how much one command may write to its output and error
	// streams together before it is stopped (default 64): the transcript
	// keeps only its head and tail, and an endless stream must end.
	OutputMB int
	// Park is how long a run parked on a question waits for its answer
	// before it ends expired (default 24 h). The box only carries it.
	Park time.Duration
}

// The defaults of Limits, each a number a user can read in the docs.
const (
	DefaultWall       = 30 * time.Minute
	DefaultCPUSeconds = 600
	DefaultMemoryMB   = 2048
	DefaultProcesses  = 256
	DefaultFileMB     = 256
	DefaultFiles      = 20000
	DefaultDiskMB     = 2048
	DefaultOutputMB   = 64
	DefaultPark       = 24 * time.Hour
	// MinPark is the shortest park the check lets through: a question
	// needs a person to read it and answer, and a shorter wait is a
	// unit mistaken (park: 30 for 30m) rather than a wish.
	MinPark = 10 * time.Second
)

// WithDefaults is l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if l.Wall == 0 {
		l.Wall = DefaultWall
	}
	if l.Park == 0 {
		l.Park = DefaultPark
	}
	set(&l.CPUSeconds, DefaultCPUSeconds)
	set(&l.MemoryMB, DefaultMemoryMB)
	set(&l.Processes, DefaultProcesses)
	set(&l.FileMB, DefaultFileMB)
	set(&l.Files, DefaultFiles)
	set(&l.DiskMB, DefaultDiskMB)
	set(&l.OutputMB, DefaultOutputMB)
	return l
}

// AgentSpec says which coding agent works in the box: the builtin one (the
// zero value) or a coding CLI by name.
type AgentSpec struct {
	// CLI is "" for the builtin agent, else one of CLIs.
	CLI string
	// Command is the CLI's executable, an absolute path; empty, its name
	// is looked up on the hub's PATH. The file alone (its links
	// resolved) is bound read-only into the box when it is not under
	// /usr already.
	Command string
	// Args are passed to the CLI after the ones the adapter gives it.
	Args []string
}

// Builtin reports whether the spec is the builtin agent.
func (a AgentSpec) Builtin() bool { return a.CLI == "" }

// Config is a company's sandbox block, decoded (hub/config reads the YAML).
type Config struct {
	// Runtime is "bubblewrap", the one runtime there is.
	Runtime string
	// Network is "none" (the default: no network at all) or "host" (the
	// host's network, for a run that must fetch packages).
	Network string
	Limits  Limits
	Agent   AgentSpec
}

// WithDefaults is c with its runtime, network and limits defaulted.
func (c Config) WithDefaults() Config {
	if c.Runtime == "" {
		c.Runtime = RuntimeBubblewrap
	}
	if c.Network == "" {
		c.Network = NetworkNone
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// Validate is every problem of c, each naming its field as the company
// file spells it (sandbox.limits.wall), so an operator fixes them in one
// pass.
func (c Config) Validate() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if c.Runtime != "" && c.Runtime != RuntimeBubblewrap {
		add("sandbox.runtime: %q is not a runtime this hub has; use bubblewrap", c.Runtime)
	}
	if c.Network != "" && c.Network != NetworkNone && c.Network != NetworkHost {
		add("sandbox.network: %q is neither none (no network in the box) nor host (the host's network)", c.Network)
	}
	l := c.Limits
	if l.Wall < 0 || (l.Wall > 0 && l.Wall < time.Second) {
		add("sandbox.limits.wall: %s is shorter than a second; give a duration such as 30m", l.Wall)
	}
	if l.Park < 0 || (l.Park > 0 && l.Park < MinPark) {
		add("sandbox.limits.park: %s is shorter than %s, too short for a person to read the run's question and answer it; give a duration such as 24h", l.Park, MinPark)
	}
	for _, n := range []struct {
		key string
		v   int
		min int
	}{
		{"cpu_seconds", l.CPUSeconds, 1}, {"memory_mb", l.MemoryMB, 64}, {"processes", l.Processes, 8},
		{"file_mb", l.FileMB, 1}, {"files", l.Files, 1}, {"disk_mb", l.DiskMB, 1}, {"output_mb", l.OutputMB, 1},
	} {
		if n.v < 0 || (n.v > 0 && n.v < n.min) {
			add("sandbox.limits.%s: %d is below %d, too little for any command to run; remove the line for the default", n.key, n.v, n.min)
		}
	}
	if a := c.Agent; !a.Builtin() && !contains(CLIs, a.CLI) {
		add("sandbox.agent.cli: %q is not a coding CLI this hub runs; use %s, or agent: builtin", a.CLI, strings.Join(CLIs, " or "))
	}
	if a := c.Agent; !a.Builtin() && a.Command != "" && !filepath.IsAbs(a.Command) {
		// Relative to what? The hub's working directory is not the
		// box's, and the file is bound into the box where it lies.
		add("sandbox.agent.command: %q is not an absolute path; name the CLI's executable from the root (/opt/opencode/bin/opencode), or leave the line out to find %s on the hub's PATH", a.Command, a.CLI)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
