package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/crewlet/hub/sandbox"
	"go.yaml.in/yaml/v3"
)

// Sandbox is the box coding runs work in (run_sandbox):
//
//	sandbox:
//	  runtime: bubblewrap        # the one runtime; the default where bwrap is found
//	  network: none              # or host
//	  limits: {wall: 30m, cpu_seconds: 600, memory_mb: 2048, processes: 256, file_mb: 256, files: 20000}
//	  agent: builtin             # or {cli: opencode}
//
// Every key may be left out for its default (package sandbox's Limits).
// Without bwrap on the node, run_sandbox is omitted and the start banner
// says why.
type Sandbox struct {
	Runtime string        `yaml:"runtime"`
	Network string        `yaml:"network"`
	Limits  SandboxLimits `yaml:"limits"`
	Agent   SandboxAgent  `yaml:"agent"`
}

// SandboxLimits are the box's limits as the file writes them: durations
// as Go spells them (30m, 24h), sizes in MiB.
type SandboxLimits struct {
	Wall       string `yaml:"wall"`
	CPUSeconds int    `yaml:"cpu_seconds"`
	MemoryMB   int    `yaml:"memory_mb"`
	Processes  int    `yaml:"processes"`
	FileMB     int    `yaml:"file_mb"`
	Files      int    `yaml:"files"`
	DiskMB     int    `yaml:"disk_mb"`
	OutputMB   int    `yaml:"output_mb"`
	Park       string `yaml:"park"`
}

// SandboxAgent is `agent: builtin` or `agent: {cli: NAME, command:
// PATH, args: [...]}`.
type SandboxAgent struct {
	// Name is the scalar form's word ("builtin"); empty for a mapping.
	Name    string
	CLI     string
	Command string
	Args    []string
	// problems are what the decoder met, said by check with the rest.
	problems []string
}

// sandboxAgentKeys are the keys of the mapping form.
var sandboxAgentKeys = []string{"cli", "command", "args"}

// UnmarshalYAML reads either form. A wrong shape is kept as a problem for
// check rather than returned, which would end the decoding of the whole
// document as if it were not YAML.
func (a *SandboxAgent) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		a.Name = n.Value
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; !contains(sandboxAgentKeys, k) {
				a.problems = append(a.problems, fmt.Sprintf("sandbox.agent.%s: not a key of a coding agent; use %s", k, strings.Join(sandboxAgentKeys, ", ")))
			}
		}
		var m struct {
			CLI     string   `yaml:"cli"`
			Command string   `yaml:"command"`
			Args    []string `yaml:"args"`
		}
		if err := n.Decode(&m); err != nil {
			a.problems = append(a.problems, "sandbox.agent: "+err.Error())
			return nil
		}
		a.CLI, a.Command, a.Args = m.CLI, m.Command, m.Args
		if a.CLI == "" {
			a.problems = append(a.problems, "sandbox.agent.cli: name the coding CLI ("+strings.Join(sandbox.CLIs, " or ")+"), or write agent: builtin")
		}
		return nil
	}
	a.problems = append(a.problems, "sandbox.agent: write builtin, or a mapping such as {cli: opencode}")
	return nil
}

// SandboxConfig is the sandbox block as package sandbox takes it, its
// defaults filled in. Call it on a checked company: a duration check
// refused is read as its default here.
func (c *Company) SandboxConfig() sandbox.Config { return c.Sandbox.raw().WithDefaults() }

// raw is the block as written, a zero for every key left out (or a
// duration that does not parse, which check says).
func (s Sandbox) raw() sandbox.Config {
	wall, _ := time.ParseDuration(s.Limits.Wall)
	park, _ := time.ParseDuration(s.Limits.Park)
	return sandbox.Config{
		Runtime: s.Runtime,
		Network: s.Network,
		Limits: sandbox.Limits{
			Wall: wall, CPUSeconds: s.Limits.CPUSeconds, MemoryMB: s.Limits.MemoryMB,
			Processes: s.Limits.Processes, FileMB: s.Limits.FileMB, Files: s.Limits.Files,
			DiskMB: s.Limits.DiskMB, OutputMB: s.Limits.OutputMB, Park: park,
		},
		Agent: sandbox.AgentSpec{CLI: s.Agent.CLI, Command: s.Agent.Command, Args: s.Agent.Args},
	}
}

// checkSandbox says every problem of the sandbox block, each naming its
// field.
func (c *Company) checkSandbox(add func(string, ...any)) {
	s := c.Sandbox
	for _, d := range []struct{ key, v, example string }{{"wall", s.Limits.Wall, "30m"}, {"park", s.Limits.Park, "24h"}} {
		if d.v == "" {
			continue
		}
		if _, err := time.ParseDuration(d.v); err != nil {
			add("sandbox.limits.%s: %q is not a duration; write one such as %s", d.key, d.v, d.example)
		}
	}
	for _, p := range s.Agent.problems {
		add("%s", p)
	}
	if n := s.Agent.Name; n != "" && n != "builtin" {
		if contains(sandbox.CLIs, n) {
			add("sandbox.agent: %q is a coding CLI; write it as agent: {cli: %s}", n, n)
		} else {
			add("sandbox.agent: %q is not an agent; use builtin, or {cli: %s}", n, strings.Join(sandbox.CLIs, " or "))
		}
	}
	for _, p := range s.raw().Validate() {
		add("%s", p)
	}
}
