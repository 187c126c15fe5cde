package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Every verb on an artifact is decided by the authority table
// (authority.DecideArtifact) from what this file works out: the caller's
// relation to the artifact, and that of whoever its turn acts for.

// access is one call's decision on one artifact, with what it was asked.
type access struct {
	authority.ArtifactDecision
	ask       authority.ArtifactAsk
	seat      string // the caller's handle
	requester string // whom the call acts for
}

// roleOf is who's relation to a: owner, or the best share reaching them
// (their seat, their unit or one above it, the company). Only seats of
// the company hold shares; an operator credential is an owner of what it
// made and nothing else.
func (s *srv) roleOf(a *artifact, who string) authority.ArtifactRole {
	if who == "" {
		return authority.RoleNone
	}
	if strings.EqualFold(a.Owner.Seat, who) {
		return authority.RoleOwner
	}
	dir := s.dir()
	seat, ok := dir.Seat(who)
	if !ok {
		return authority.RoleNone
	}
	best := authority.RoleNone
	for _, sh := range a.Shares {
		reaches := false
		switch {
		case sh.To == "company":
			reaches = true
		case strings.HasPrefix(sh.To, "unit:"):
			reaches = unitWithin(dir, seat.Unit, strings.TrimPrefix(sh.To, "unit:"))
		default:
			reaches = strings.EqualFold(sh.To, seat.Handle)
		}
		if reaches && sh.Role > best {
			best = sh.Role
		}
	}
	return best
}

// unitWithin reports whether unit is want or sits beneath it: a share to
// a department reaches its teams.
func unitWithin(dir *authority.Directory, unit, want string) bool {
	for depth := 0; unit != "" && depth < 32; depth++ {
		if unit == want {
			return true
		}
		u, ok := dir.Unit(unit)
		if !ok {
			return false
		}
		unit = u.Parent
	}
	return false
}

// requesterOf is what the company knows about whom c acts for. A person
// or a credential acts for itself; an agent's turn for whoever woke it,
// who must be somebody the directory holds (or the seat itself, for a
// turn nobody else woke).
func (s *srv) requesterOf(c authority.Caller) (authority.RequesterRelation, string) {
	if c.Kind != authority.KindAgent {
		return authority.RequesterSelf, c.Seat
	}
	req := strings.TrimPrefix(strings.TrimSpace(c.Requester), "@")
	switch {
	case req == "":
		return authority.RequesterUnknown, ""
	case strings.EqualFold(req, c.Seat):
		return authority.RequesterSelf, c.Seat
	}
	if seat, ok := s.dir().Seat(req); ok {
		return authority.RequesterKnown, seat.Handle
	}
	return authority.RequesterUnknown, req
}

// checkRequester refuses, before anything is read, a turn acting for
// somebody the company does not know: it opens no artifact at all, so it
// is not even told which ids exist.
func (s *srv) checkRequester(c authority.Caller) error {
	if rel, _ := s.requesterOf(c); rel == authority.RequesterUnknown {
		d := authority.ArtifactDecision{Denied: authority.DenyUnknownRequester}
		return authority.ArtifactRefusal(d, authority.ArtifactAsk{}, "", "")
	}
	return nil
}

// decide asks the table about verb on a (nil: an id nothing holds).
func (s *srv) decide(c authority.Caller, a *artifact, id string, verb authority.ArtifactVerb) (access, error) {
	if err := s.checkRequester(c); err != nil {
		return access{}, err
	}
	if a == nil {
		return access{}, authority.ArtifactMissing(id)
	}
	rel, req := s.requesterOf(c)
	ask := authority.ArtifactAsk{
		Verb:          verb,
		Kind:          c.Kind,
		SeatRole:      s.roleOf(a, c.Seat),
		Owns:          strings.EqualFold(a.Owner.Seat, c.Seat),
		Admin:         authority.IsAdmin(c, s.dir()),
		ManageOthers:  s.d.ManageOthers(),
		Requester:     rel,
		RequesterRole: s.roleOf(a, req),
	}
	d := authority.DecideArtifact(ask)
	acc := access{ArtifactDecision: d, ask: ask, seat: c.Seat, requester: req}
	if r := authority.ArtifactRefusal(d, ask, a.ID, req); r != nil {
		return acc, r
	}
	return acc, nil
}

// trashed refuses any call on an artifact in the trash, naming the trash
// and its owner (ART-4): nothing of it is served and nothing written until
// a person restores it. Only a caller with a relation gets this far.
func trashed(a *artifact) error {
	if !a.Trashed {
		return nil
	}
	return authority.Refuse(authority.Forbidden, "%s is in the trash: nothing of it is read or written until a person restores it in the dashboard. Its owner is @%s.", a.ID, a.Owner.Seat).
		WithData("trashed", true).WithData("owner", a.Owner.Seat)
}

// elevatedPayload is the record of an administrator's read through the
// admin path.
type elevatedPayload struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	What string `json:"what,omitempty"`
}

// recordElevated writes the record of an administrator's read through the
// admin path before anything is shown (ART-5). A record that cannot be
// written, or whose outcome is unknown, refuses the read: nothing is shown.
func (s *srv) recordElevated(ctx context.Context, c authority.Caller, id, tool, what string) error {
	if s.w.Node() == nil {
		return authority.Refuse(authority.Unavailable, "The artifact store has no state node here; nothing was read.")
	}
	args, _ := json.Marshal(elevatedPayload{ID: id, Tool: tool, What: what})
	_, err := s.w.Node().Write(ctx, state.Op{Tool: tool + "#elevated_read", Args: args, Kind: kindElevated, Payload: args, Caller: c, At: s.w.Now().UTC()})
	if err == nil {
		return nil
	}
	var r *authority.Refusal
	if !errors.As(err, &r) || r.Class != authority.NotFound {
		s.d.Logger.Warn("artifacts: elevated read not recorded", "artifact", id, "tool", tool, "err", err)
	}
	if r != nil && r.Class == authority.NotFound {
		return r
	}
	return authority.Refuse(authority.Unavailable, "An administrator's read of %s through the admin path is recorded before anything is shown, and the record could not be written; nothing was shown. Try again shortly.", id).
		WithData("elevated_read", "not_recorded")
}

// show is what a read does once it is allowed: the elevated-read record
// first, on the admin path.
func (s *srv) show(ctx context.Context, c authority.Caller, acc access, id, tool, what string) error {
	if !acc.AdminPath {
		return nil
	}
	return s.recordElevated(ctx, c, id, tool, what)
}

func applyElevated(a *applier) (any, error) {
	var pl elevatedPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.must(pl.ID)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("read through the admin path (%s)", pl.Tool)
	if pl.What != "" {
		what += ": " + pl.What
	}
	if err := a.history(art.ID, what, 0); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID}, nil
}
