package config

// Learning says what agent seats learn from their own turns, beyond what
// they choose to keep themselves (their diary, their skills' refinements).
//
//	learning:
//	  synthesize_skills: true
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
}
