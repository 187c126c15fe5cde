package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup is the box's own control groups, where the machine lets the hub
// make them: a pids group that holds its process count (a fork bomb meets
// it, and it names every process of the box for the kill) and a memory
// group that holds its memory together. Either may be missing; a box
// without them keeps its rlimits.
type cgroup struct {
	pids, memory string // directories; "" when not offered
}

// cgroupV1Root is where a cgroup v1 hierarchy of a controller is mounted on
// the machines the hub runs on (Debian, and containers built like it).
const cgroupV1Root = "/sys/fs/cgroup"

// newCgroup makes the box's groups under the hub's own, named name, with
// l's process and memory limits. What the machine refuses is left out.
func newCgroup(name string, l Limits) *cgroup {
	cg := &cgroup{}
	own := ownCgroups()
	if dir := makeGroup(own, "pids", name); dir != "" {
		if writeValue(dir, "pids.max", strconv.Itoa(l.Processes)) == nil {
			cg.pids = dir
		} else {
			_ = os.Remove(dir)
		}
	}
	if dir := makeGroup(own, "memory", name); dir != "" {
		bytes := strconv.FormatInt(int64(l.MemoryMB)<<20, 10)
		if writeValue(dir, "memory.limit_in_bytes", bytes) == nil {
			// Swap too, where it is accounted: a box must not page its
			// way past its memory.
			_ = writeValue(dir, "memory.memsw.limit_in_bytes", bytes)
			cg.memory = dir
		} else {
			_ = os.Remove(dir)
		}
	}
	return cg
}

// ownCgroups maps each cgroup v1 controller to the hub's own group in it,
// from /proc/self/cgroup.
func ownCgroups() map[string]string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// makeGroup makes the group name under the hub's own in controller's
// hierarchy; "" where there is none or it may not be made.
func makeGroup(own map[string]string, controller, name string) string {
	path, ok := own[controller]
	if !ok {
		return ""
	}
	mount := filepath.Join(cgroupV1Root, controller)
	if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
		return ""
	}
	dir := filepath.Join(mount, path, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return ""
	}
	return dir
}

func writeValue(dir, file, v string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(v), 0)
}

// procsFiles are the cgroup.procs files a process writes its pid to, to
// enter the box's groups before it becomes bwrap.
func (cg *cgroup) procsFiles() []string {
	var out []string
	for _, d := range []string{cg.pids, cg.memory} {
		if d != "" {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	return out
}

// counters is what the groups say the box ran into so far: the times a
// fork was refused for the process limit, and the times memory reached
// its limit or a process was killed for it.
type counters struct{ pidsMax, memFail int64 }

func (cg *cgroup) counters() counters {
	var c counters
	if cg.pids != "" {
		if b, err := os.ReadFile(filepath.Join(cg.pids, "pids.events")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "max "); ok {
					c.pidsMax, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
		}
	}
	if cg.memory != "" {
		// A limit met and reclaimed below counts in failcnt; one that
		// could not be, and killed a process, in oom_control's oom_kill
		// only.
		if b, err := os.ReadFile(filepath.Join(cg.memory, "memory.failcnt")); err == nil {
			c.memFail, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		if b, err := os.ReadFile(filepath.Join(cg.memory, "memory.oom_control")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
					n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					c.memFail += n
				}
			}
		}
	}
	return c
}

// members lists the pids the groups hold now.
func (cg *cgroup) members() []int {
	seen := map[int]bool{}
	var out []int
	for _, f := range cg.procsFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// drainBound is how long killing a box's last processes may take before
// the box says it could not.
const drainBound = 10 * time.Second

// drain kills every process the groups hold until they hold none: a
// process forked between a read of the list and the kills is in the next
// read. The kernel gives no event for an emptied v1 group, so the list is
// read again every few milliseconds, within drainBound.
func (cg *cgroup) drain() error {
	deadline := time.Now().Add(drainBound)
	for {
		pids := cg.members()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the box still holds %d processes %s after they were killed", len(pids), drainBound)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// remove kills what is left and removes the groups.
func (cg *cgroup) remove() error {
	err := cg.drain()
	for _, d := range []string{cg.pids, cg.memory} {
		if d != "" {
			if rerr := os.Remove(d); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return err
}

// removeGroupsOf removes the groups of the box directory named box, left
// by a hub that ended without closing it: their names start with it.
func removeGroupsOf(box string) error {
	var errs []error
	own := ownCgroups()
	for _, controller := range []string{"pids", "memory"} {
		path, ok := own[controller]
		if !ok {
			continue
		}
		parent := filepath.Join(cgroupV1Root, controller, path)
		matches, _ := filepath.Glob(filepath.Join(parent, "crewlet-"+box+"-*"))
		for _, dir := range matches {
			cg := &cgroup{}
			if controller == "pids" {
				cg.pids = dir
			} else {
				cg.memory = dir
			}
			errs = append(errs, cg.remove())
		}
	}
	return errors.Join(errs...)
}
