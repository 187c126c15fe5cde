package config

import (
	"strings"
	"testing"
)

// BLT-1, OUT-2: learning.synthesize_skills and learning.summarize_episodes
// are read from the company file, each off unless the file turns it on; a
// learning key the hub does not know is refused like any other, not
// ignored.
func TestLearningKeys(t *testing.T) {
	off, err := Parse([]byte("company: {name: Acme}\n"))
	if err != nil || off.Learning.SynthesizeSkills || off.Learning.SummarizeEpisodes {
		t.Fatalf("by default: %+v %v", off.Learning, err)
	}
	on, err := Parse([]byte("company: {name: Acme}\nlearning:\n  synthesize_skills: true\n"))
	if err != nil || !on.Learning.SynthesizeSkills {
		t.Fatalf("turned on: %+v %v", on.Learning, err)
	}
	both, err := Parse([]byte("company: {name: Acme}\nlearning:\n  summarize_episodes: true\n"))
	if err != nil || !both.Learning.SummarizeEpisodes || both.Learning.SynthesizeSkills {
		t.Fatalf("summarize_episodes turned on: %+v %v", both.Learning, err)
	}
	if _, err := Parse([]byte("company: {name: Acme}\nlearning:\n  synthesise_skills: true\n")); err == nil || !strings.Contains(err.Error(), "synthesise_skills") {
		t.Fatalf("an unknown learning key: %v", err)
	}
}
