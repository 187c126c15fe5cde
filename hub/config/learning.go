package config

// Learning says what agent seats learn from their own turns, beyond what
// they choose to keep themselves (their diary, their skills' refinements).
//
//	learning:
//	  synthesize_skills: true
//	  summarize_episodes: true
//
// Each switch is off unless the file turns it on: each costs an auxiliary
// model call a turn it applies to, charged to the seat.
type Learning struct {
	// SynthesizeSkills: after a delivered turn that worked through several
	// distinct tools, the seat's auxiliary model is asked whether the turn
	// holds a procedure worth keeping, and a new one is kept as the seat's
	// own skill (version 1), which use_skill reads and refine_skill
	// corrects (BLT-1).
	SynthesizeSkills bool `yaml:"synthesize_skills"`
	// SummarizeEpisodes: a turn's similar prior work is one summary of
	// the recalled turns by the seat's auxiliary model, rather than a
	// bullet per turn; each recalled ask and account past about 11 KB is
	// condensed before the summary reads it (OUT-2).
	SummarizeEpisodes bool `yaml:"summarize_episodes"`
}
