package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Mount points inside every box.
const (
	// Workspace is where the workspace is bound, and where every
	// command starts.
	Workspace = "/workspace"
	// Home is the box's home directory: an empty tmpfs, so a CLI's own
	// state and caches stay out of the workspace and its commits.
	Home = "/home/box"
)

// Box is one run's sandbox: its workspace on the host and the limits every
// command in it is held to. Open makes one; Close removes it.
type Box struct {
	bwrap   string
	prlimit string
	cfg     Config
	dir     string // the host directory holding the workspace
	ws      string // the workspace on the host
	env     []string
	cg      *cgroup
	extra   []string // read-only binds the agent needs (its CLI's executable)

	// runs take turns: each is killed whole and its processes drained
	// before the next starts, so a limit reached by one never kills
	// another, and what the groups count belongs to the run reading it.
	runs sync.Mutex

	mu      sync.Mutex
	closed  bool
	active  map[int]bool // process groups of runs in flight, for Close
	gateway *gateway     // the model gateway, once ServeModel opened it
}

// Open makes a box: a fresh directory under parentDir holding a workspace
// with a git repository initialised in it (so a run's delivered refs are
// the commits its agent made), the box's cgroups where the machine offers
// them, and env as the environment of everything run in it. env is taken
// as given: build it with Env, which holds it to the host allowlist plus
// what the run's configuration names (ENV-1). Only the workspace is bound
// into the box, so parentDir may lie under the hub's data directory.
func Open(ctx context.Context, cfg Config, parentDir string, env []string) (*Box, error) {
	cfg = cfg.WithDefaults()
	if problems := cfg.Validate(); len(problems) > 0 {
		return nil, errors.New(problems[0])
	}
	bwrap, err := find(ctx)
	if err != nil {
		return nil, err
	}
	cli := ""
	if !cfg.Agent.Builtin() {
		if cli, err = findCLI(cfg.Agent); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(parentDir, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parentDir, "box-")
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	prlimit, err := exec.LookPath("prlimit") // Find saw it
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	b := &Box{bwrap: bwrap, prlimit: prlimit, cfg: cfg, dir: dir, ws: ws, env: append([]string(nil), env...),
		cg: newCgroup("crewlet-"+filepath.Base(dir)+"-"+randomHex(4), cfg.Limits), active: map[int]bool{}}
	if !cfg.Agent.Builtin() {
		// The CLI is seen in the box where the host has it: the
		// executable file alone, read-only, unless it is under /usr
		// already. Never its directory: an operator may keep it beside
		// the company file, whose data directory holds the hub's tokens.
		b.cfg.Agent.Command = cli
		if !strings.HasPrefix(cli, "/usr/") {
			b.extra = append(b.extra, cli)
		}
	}
	// The repository is made inside the box, by the box's own git, so it
	// is one the box's commands can use as they find it.
	res, err := b.Run(ctx, []string{"sh", "-c", `git init -q -b main . && git config user.name "Coding run" && git config user.email run@crewlet.invalid`}, nil)
	if err == nil && res.Exit != 0 {
		err = fmt.Errorf("git init in the workspace ended %d: %s", res.Exit, res.Stderr)
	}
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("the box could not be prepared: %w", err)
	}
	return b, nil
}

// findCLI is the coding CLI's executable with its links resolved (an npm
// .bin link's target is what is bound into the box), or why there is none.
func findCLI(spec AgentSpec) (string, error) {
	command := spec.Command
	if command == "" {
		path, err := exec.LookPath(spec.CLI)
		if err != nil {
			return "", fmt.Errorf("the coding CLI %s is not installed on this node: it is not on the hub's PATH, and sandbox.agent.command names none", spec.CLI)
		}
		command = path
	}
	real, err := filepath.EvalSymlinks(command)
	if err != nil {
		return "", fmt.Errorf("the coding CLI %s is not at %s (sandbox.agent.command): %v", spec.CLI, command, err)
	}
	if fi, err := os.Stat(real); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("the coding CLI %s at %s (sandbox.agent.command) is not an executable file", spec.CLI, command)
	}
	return real, nil
}

// Sweep removes every box a hub left under parentDir without closing it
// (it ended, or its node died), with whatever their cgroups still hold.
// Call it as the node starts, before it opens a box there: a box is its
// run's, and a run is never resumed by another process.
func Sweep(parentDir string) error {
	entries, err := os.ReadDir(parentDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "box-") {
			continue
		}
		dir := filepath.Join(parentDir, e.Name())
		errs = append(errs, removeGroupsOf(e.Name()), removeBoxDir(dir))
	}
	return errors.Join(errs...)
}

// Config is the box's configuration, with its defaults.
func (b *Box) Config() Config { return b.cfg }

// Dir is the workspace on the host, for the caller's records only: read
// and write it through the box's own methods, which hold paths to it.
func (b *Box) Dir() string { return b.ws }

// Close kills whatever still runs in the box and removes its workspace and
// cgroups. It is safe twice, and from another goroutine than a Run's.
func (b *Box) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for pgid := range b.active {
		killGroup(pgid)
	}
	gw := b.gateway
	b.mu.Unlock()
	if gw != nil {
		_ = gw.srv.Close()
	}
	// Wait for a run in flight to see its kill and drain.
	b.runs.Lock()
	defer b.runs.Unlock()
	err := b.cg.remove()
	return errors.Join(err, removeBoxDir(b.dir))
}

// removeBoxDir removes a box's directory, its workspace's directories
// unlocked first: a command in the box may have locked one it made, and a
// hub that does not run as root could not remove it.
func removeBoxDir(dir string) error {
	err := unlockTree(filepath.Join(dir, "workspace"))
	if rmErr := os.RemoveAll(dir); rmErr != nil {
		return errors.Join(err, rmErr)
	}
	return nil
}

func (b *Box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

var errClosed = errors.New("the box was removed: its run's turn ended or its park expired")

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// bwrapArgs are bwrap's arguments for one command, up to the "--" before
// it: what of the system the box sees, its namespaces and its workspace.
func (b *Box) bwrapArgs() []string {
	args := systemBinds()
	args = append(args,
		"--unshare-all",
		"--die-with-parent",
		"--new-session",
		// Root inside the box only as far as owning its workspace: no
		// capability, so nothing it mounts, traces or overrides.
		"--cap-drop", "ALL",
		"--hostname", "box",
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--tmpfs", "/home",
		"--dir", Home,
		"--bind", b.ws, Workspace,
		"--chdir", Workspace,
	)
	// After /tmp and /home are the box's own, so a CLI kept under
	// either is not hidden by them.
	for _, d := range b.extra {
		args = append(args, "--ro-bind", d, d)
	}
	b.mu.Lock()
	if b.gateway != nil {
		args = append(args, "--ro-bind", b.gateway.dir, GatewayDir)
	}
	b.mu.Unlock()
	if b.cfg.Network == NetworkHost {
		args = append(args, "--share-net", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	return args
}

// systemBinds are the host's system directories a toolchain needs,
// read-only: /usr whole, the top-level links into it as the host has them
// (or the directories, on a system without a merged /usr), and the few
// /etc files that name users, hosts, time, libraries and trusted
// certificates. Nothing else of /etc: not shadow, not the machine's keys.
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(top)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(top); err == nil {
				args = append(args, "--symlink", target, top)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", top, top)
		}
	}
	for _, f := range etcPieces {
		args = append(args, "--ro-bind-try", f, f)
	}
	return args
}

// etcPieces are the /etc entries bound into a box.
var etcPieces = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/timezone", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
	"/etc/alternatives", "/etc/mime.types", "/etc/os-release",
}
