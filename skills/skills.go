// Package skills holds the skills the engine ships as files: each
// directory is one skill a person's own assistant installs by copying it
// into its skills folder, and the engine embeds the same file as a tool
// skill's body, so the two cannot drift apart (ART-9).
package skills

import (
	_ "embed"
	"strings"
)

//go:embed crewlet-artifacts/SKILL.md
var artifactsFile string

// Artifacts is the body of skill:artifacts: crewlet-artifacts/SKILL.md
// past its front matter, which is for an assistant's skill loader.
func Artifacts() string { return Body(artifactsFile) }

// Body is a SKILL.md's text past its front matter (the block between the
// two "---" lines that open it); a file without one is its own body.
func Body(file string) string {
	rest, ok := strings.CutPrefix(file, "---\n")
	if !ok {
		return file
	}
	_, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		return file
	}
	return strings.TrimLeft(body, "\n")
}
