package skills

import (
	"strings"
	"testing"
)

// ART-9: the embedded body of skill:artifacts is its SKILL.md past the
// front matter an assistant's skill loader reads; a file with no front
// matter is its own body.
func TestBody(t *testing.T) {
	if !strings.HasPrefix(artifactsFile, "---\nname: crewlet-artifacts\n") {
		t.Fatalf("crewlet-artifacts/SKILL.md opens with %.60q", artifactsFile)
	}
	if b := Artifacts(); !strings.HasPrefix(b, "# skill:artifacts") || strings.Contains(b, "name: crewlet-artifacts") {
		t.Fatalf("the body opens with %.80q", b)
	}
	if got := Body("# plain\ntext\n"); got != "# plain\ntext\n" {
		t.Fatalf("a file without front matter: %q", got)
	}
	if got := Body("---\nname: x\n---\n\n# x\n"); got != "# x\n" {
		t.Fatalf("past the front matter: %q", got)
	}
}
