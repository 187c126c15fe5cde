package serve

import (
	"fmt"
	"log/slog"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/sandbox"
)

// sandboxNote is the start banner's line when this node cannot box a
// coding run: run_sandbox is then omitted rather than registered and
// broken (CAT-3), and why is said where a person looks first, and logged.
// Empty when a box can be had.
func sandboxNote(log *slog.Logger) string {
	if _, err := sandbox.Find(); err != nil {
		log.Warn("sandbox_unavailable", "reason", err.Error(), "effect", "run_sandbox is omitted")
		return err.Error()
	}
	return ""
}

// sandboxLine is `config check`'s line on coding runs: the box a hub
// started here would run them in, or why it would run none.
func sandboxLine(c *config.Company) string {
	bwrap, err := sandbox.Find()
	if err != nil {
		return err.Error()
	}
	s := c.SandboxConfig()
	l := s.Limits
	agent := "builtin"
	if !s.Agent.Builtin() {
		agent = s.Agent.CLI
	}
	return fmt.Sprintf("sandbox: %s (%s), network %s, agent %s; each command within %s, %d CPU seconds, %d MiB of memory, %d processes, "+
		"files of %d MiB and %d MiB of output; the workspace within %d MiB and %d files; a parked run waits %s",
		s.Runtime, bwrap, s.Network, agent, l.Wall, l.CPUSeconds, l.MemoryMB, l.Processes, l.FileMB, l.OutputMB, l.DiskMB, l.Files, l.Park)
}
