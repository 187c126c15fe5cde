package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Find is the bwrap a box is run by, or why no box can be had here, in
// words for the start banner: without one, run_sandbox is omitted rather
// than registered and broken (CAT-3). A bwrap that is installed but cannot
// make its namespaces (a container without user namespaces, say) is no
// box either, so Find runs it once, for at most 10 seconds.
func Find() (string, error) { return find(context.Background()) }

// find is Find held to ctx as well: a box's Open passes its own, so a
// caller that gave up is not kept waiting for the trial run.
func find(ctx context.Context) (string, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("no sandbox: bwrap (Debian's bubblewrap package) is not installed on this node, so coding runs (run_sandbox) are not offered; install bubblewrap and restart the hub")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		return "", errors.New("no sandbox: prlimit (util-linux) is not installed on this node, and a box's limits are set with it, so coding runs (run_sandbox) are not offered")
	}
	trial, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(trial, path, append(systemBinds(), "--unshare-all", "--die-with-parent", "--", "/bin/true")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// The caller's end, not the node's failing.
			return "", fmt.Errorf("the box was not opened: %w", context.Cause(ctx))
		}
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		return "", fmt.Errorf("no sandbox: %s is installed but cannot make a box here (%s), so coding runs (run_sandbox) are not offered; a node needs user namespaces, or bwrap run as root", path, why)
	}
	return path, nil
}
