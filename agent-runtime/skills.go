package agent

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/skills"
)

// Skills come in two kinds. A tool skill ships with the engine and
// teaches how to use a group of tools; the tools it guards are held back
// in a turn until it is loaded (load_tool_skill), and the turn loop
// enforces that (turn.decide). A seat's own skill is a procedure the seat
// keeps for itself: synthesized from one of its turns (synthesis.go), read
// by use_skill, corrected by refine_skill, which writes a new version and
// keeps the old ones. refine_skill corrects a skill the seat has; it
// starts none.

// ToolSkill is one bundled tool skill.
type ToolSkill struct {
	Key   string
	Title string
	// Guards are the tools held back until the skill is loaded in a turn.
	Guards []string
	Body   string
}

// bundledToolSkills are every tool skill the engine ships. A body is the
// skill file a person's own assistant installs (package skills), so a
// seat and an assistant read one text (ART-9).
var bundledToolSkills = []ToolSkill{{
	Key:   "skill:artifacts",
	Title: "Making and filling artifacts",
	// The tools that write bytes, a schema or rows (ART-9).
	Guards: []string{"create_artifact", "publish_artifact", "upload_artifact_asset", "write_artifact_data", "set_artifact_schema"},
	Body:   skills.Artifacts(),
}}

// BundledToolSkills lists the tool skills whose tools this node
// registers: has reports whether a tool is registered. A skill for tools
// the node does not have is not offered (CAT-3).
func BundledToolSkills(has func(tool string) bool) []ToolSkill {
	var out []ToolSkill
	for _, s := range bundledToolSkills {
		if slices.ContainsFunc(s.Guards, has) {
			out = append(out, s)
		}
	}
	return out
}

// Bounds of what a seat writes about itself: a note or a procedure is
// stored and read back whole, so one past its bound is refused (naming
// the field and the limit), never cut (OUT-2).
const (
	maxNote      = 4000
	maxSkillBody = 32 << 10
	maxReason    = 600
	maxQuery     = 400
)

var skillNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// skill is a seat's own skill with every version it had, oldest first.
type skill struct {
	Name     string         `json:"name"`
	Versions []skillVersion `json:"versions"`
}

type skillVersion struct {
	Version int       `json:"version"`
	Body    string    `json:"body"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	Turn    string    `json:"turn,omitempty"`
}

type skillPayload struct {
	Seat   string `json:"seat"`
	Name   string `json:"name"`
	Body   string `json:"body"`
	Reason string `json:"reason,omitempty"`
	// How is skillSynthesized (a first version, kept only where the seat
	// has no skill by the name) or skillRefined (a next version, of a
	// skill the seat has). Empty on a log written before the two were
	// told apart, where a write started a skill or added to one.
	How string `json:"how,omitempty"`
}

const (
	skillSynthesized = "synthesized"
	skillRefined     = "refined"
)

func applySkill(a *servers.Apply) (any, error) {
	var p skillPayload
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	var s skill
	found, err := state.GetJSON(a.R, kSkill+p.Seat+"/"+p.Name, &s)
	if err != nil {
		return nil, err
	}
	// Decided here too, so two writes racing for one name cannot both
	// start it, nor a refinement start one.
	switch {
	case p.How == skillSynthesized && found:
		return nil, authority.Refuse(authority.Exists, "@%s already has a skill called %q.", p.Seat, p.Name)
	case p.How == skillRefined && !found:
		return nil, authority.Refuse(authority.NotFound, "@%s has no skill called %q.", p.Seat, p.Name)
	}
	s.Name = p.Name
	v := skillVersion{Version: len(s.Versions) + 1, Body: p.Body, Reason: p.Reason, At: a.At(), Turn: a.Op.Caller.TurnKey}
	s.Versions = append(s.Versions, v)
	return map[string]int{"version": v.Version}, state.SetJSON(a.B, kSkill+p.Seat+"/"+p.Name, s)
}

// ---- load_tool_skill ----

type loadToolSkillIn struct {
	Key string `json:"key" jsonschema:"the tool skill's key, such as skill:artifacts"`
}

type loadToolSkillOut struct {
	Key    string   `json:"key"`
	Title  string   `json:"title"`
	Guards []string `json:"guards"`
	Body   string   `json:"body"`
}

func loadToolSkill(offered []ToolSkill) func(context.Context, authority.Caller, loadToolSkillIn) (loadToolSkillOut, error) {
	return func(_ context.Context, _ authority.Caller, in loadToolSkillIn) (loadToolSkillOut, error) {
		key := strings.ToLower(strings.TrimSpace(in.Key))
		var keys []string
		for _, s := range offered {
			if s.Key == key {
				return loadToolSkillOut(s), nil
			}
			keys = append(keys, s.Key)
		}
		return loadToolSkillOut{}, authority.Refuse(authority.NotFound, "No tool skill has the key %q; this node has %s.", in.Key, strings.Join(keys, ", "))
	}
}

// ---- use_skill / refine_skill ----

type useSkillIn struct {
	Name string `json:"name" jsonschema:"the skill's name"`
}

type useSkillOut struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Body    string `json:"body"`
	// Versions is how many versions the skill has had.
	Versions int `json:"versions"`
}

type refineSkillIn struct {
	Name   string `json:"name" jsonschema:"the skill's name: lower-case letters, digits, '.', '_' or '-'"`
	Body   string `json:"body" jsonschema:"the whole corrected procedure; it replaces the body, and the previous version is kept"`
	Reason string `json:"reason" jsonschema:"what was wrong with the previous version, in a sentence"`
	servers.OpIDArg
}

type refineSkillOut struct {
	servers.WriteOut
	Name    string `json:"name"`
	Version int    `json:"version,omitempty"`
}

// seatOnly refuses a caller that is not an agent seat inside a turn: a
// seat's diary, skills and questions are its own.
func seatOnly(c authority.Caller, tool string) error {
	if c.Kind != authority.KindAgent || c.TurnKey == "" {
		return authority.Refuse(authority.Forbidden, "%s is an agent seat's own, inside one of its turns; it has nothing for this caller.", tool)
	}
	return nil
}

func (b *builtins) useSkill(_ context.Context, c authority.Caller, in useSkillIn) (useSkillOut, error) {
	if err := seatOnly(c, "use_skill"); err != nil {
		return useSkillOut{}, err
	}
	var s skill
	var names []string
	found := false
	err := b.store.view(func(r pebble.Reader) error {
		var err error
		if found, err = state.GetJSON(r, kSkill+c.Seat+"/"+strings.TrimSpace(in.Name), &s); err != nil || found {
			return err
		}
		return scan(r, kSkill+c.Seat+"/", func(k string, _ []byte) error {
			names = append(names, strings.TrimPrefix(k, kSkill+c.Seat+"/"))
			return nil
		})
	})
	if err != nil {
		return useSkillOut{}, err
	}
	if !found || len(s.Versions) == 0 {
		return useSkillOut{}, noSkill(in.Name, names)
	}
	v := s.Versions[len(s.Versions)-1]
	return useSkillOut{Name: s.Name, Version: v.Version, Body: v.Body, Versions: len(s.Versions)}, nil
}

func (b *builtins) refineSkill(ctx context.Context, c authority.Caller, in refineSkillIn) (refineSkillOut, error) {
	if err := seatOnly(c, "refine_skill"); err != nil {
		return refineSkillOut{}, err
	}
	call, err := b.writes.Begin(c, "refine_skill", &in, false)
	if err != nil {
		return refineSkillOut{}, err
	}
	wo, res, err := servers.Write[map[string]int](ctx, b.writes, call, func(r pebble.Reader) (servers.Intent, error) {
		var names []string
		if err := scan(r, kSkill+c.Seat+"/", func(k string, _ []byte) error {
			names = append(names, strings.TrimPrefix(k, kSkill+c.Seat+"/"))
			return nil
		}); err != nil {
			return servers.Intent{}, err
		}
		switch {
		case !skillNameRe.MatchString(in.Name):
			return servers.Intent{}, authority.Refuse(authority.Invalid, "name %q must be lower-case letters, digits, '.', '_' or '-', at most 64.", in.Name)
		case !slices.Contains(names, in.Name):
			return servers.Intent{}, noSkill(in.Name, names)
		case strings.TrimSpace(in.Body) == "":
			return servers.Intent{}, authority.Refuse(authority.Invalid, "body is empty; write the whole corrected procedure.")
		case len(in.Body) > maxSkillBody:
			return servers.Intent{}, authority.Refuse(authority.Invalid, "body is %d bytes; a skill holds at most %d. Shorten it and call again.", len(in.Body), maxSkillBody)
		case len(in.Reason) > maxReason:
			return servers.Intent{}, authority.Refuse(authority.Invalid, "reason is %d bytes; it holds at most %d, one sentence. Shorten it and call again.", len(in.Reason), maxReason)
		}
		return servers.Intent{Kind: kindSkill, Payload: skillPayload{Seat: c.Seat, Name: in.Name, Body: in.Body, Reason: in.Reason, How: skillRefined},
			What: fmt.Sprintf("the new version of your skill %s", in.Name)}, nil
	})
	if err != nil {
		return refineSkillOut{}, err
	}
	out := refineSkillOut{WriteOut: wo, Name: in.Name}
	if res != nil {
		out.Version = (*res)["version"]
	}
	return out, nil
}

// noSkill refuses a skill name the seat has none by, naming the ones it
// has: a seat's skills are synthesized from its own turns, so a name
// nothing kept is not started by a call either.
func noSkill(name string, have []string) error {
	if len(have) == 0 {
		return authority.Refuse(authority.NotFound, "You have no skills yet: one is kept from a turn of yours that worked through a procedure, and refine_skill then corrects it.")
	}
	return authority.Refuse(authority.NotFound, "You have no skill called %q; yours are %s.", name, strings.Join(have, ", "))
}
