package artifacts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// ---- share_artifact, unshare_artifact ----

type shareIn struct {
	ID   string `json:"id" jsonschema:"the artifact's id (art_...)"`
	To   string `json:"to" jsonschema:"a seat's handle, a unit as unit:<key>, or company"`
	Role string `json:"role,omitempty" jsonschema:"viewer (the default), contributor or editor"`
	servers.OpIDArg
}

type unshareIn struct {
	ID string `json:"id" jsonschema:"the artifact's id (art_...)"`
	To string `json:"to" jsonschema:"whom the share to withdraw is to: a seat's handle, unit:<key>, or company"`
	servers.OpIDArg
}

type shareOut struct {
	servers.WriteOut
	ID     string      `json:"id,omitempty"`
	URL    string      `json:"url,omitempty"`
	Shares []shareView `json:"shares,omitempty"`
}

type sharePayload struct {
	ID   string                 `json:"id"`
	To   string                 `json:"to"`
	Role authority.ArtifactRole `json:"role"` // none withdraws the share
}

// shareTarget checks whom a share is to and answers it as stored: a
// seat's handle as the directory spells it, unit:<id>, or company. Naming
// nobody is the argument's fault (REF-3).
func (s *srv) shareTarget(to string) (string, error) {
	to = strings.TrimPrefix(strings.TrimSpace(to), "@")
	switch {
	case to == "company":
		return to, nil
	case strings.HasPrefix(to, "unit:"):
		if _, ok := s.dir().Unit(strings.TrimPrefix(to, "unit:")); !ok {
			return "", authority.Refuse(authority.Invalid, "to names %s, and the company has no such unit.", to).WithData("argument", "to")
		}
		return to, nil
	}
	seat, ok := s.dir().Seat(to)
	if !ok {
		return "", authority.Refuse(authority.Invalid, "to names %q, and nobody in the company has that handle; share to a seat, unit:<key> or company.", to).WithData("argument", "to")
	}
	return seat.Handle, nil
}

// check is every rule a share keeps; the tool and the projector both ask it.
func (pl sharePayload) check(art *artifact) error {
	if pl.Role > authority.RoleEditor {
		return authority.Refuse(authority.Invalid, "role %s cannot be shared: a share is viewer, contributor or editor, and an artifact has one owner.", pl.Role).WithData("argument", "role")
	}
	if strings.EqualFold(pl.To, art.Owner.Seat) {
		return authority.Refuse(authority.Invalid, "@%s owns %s already.", art.Owner.Seat, art.ID).WithData("argument", "to")
	}
	return nil
}

func (s *srv) shareArtifact(ctx context.Context, c authority.Caller, in shareIn) (shareOut, error) {
	role := authority.RoleViewer
	if in.Role != "" {
		var ok bool
		if role, ok = authority.ParseArtifactRole(in.Role); !ok || role == authority.RoleNone {
			return shareOut{}, authority.Refuse(authority.Invalid, "role %q is not viewer, contributor or editor.", in.Role).WithData("argument", "role")
		}
	}
	return s.changeShare(ctx, c, "share_artifact", &in, in.ID, in.To, role)
}

func (s *srv) unshareArtifact(ctx context.Context, c authority.Caller, in unshareIn) (shareOut, error) {
	return s.changeShare(ctx, c, "unshare_artifact", &in, in.ID, in.To, authority.RoleNone)
}

func (s *srv) changeShare(ctx context.Context, c authority.Caller, tool string, in servers.WriteInput, id, to string, role authority.ArtifactRole) (shareOut, error) {
	call, err := s.w.Begin(c, tool, in, true)
	if err != nil {
		return shareOut{}, err
	}
	wo, _, err := servers.Write[artifactResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, id)
		if err != nil {
			return servers.Intent{}, err
		}
		if _, err := s.decide(c, art, id, authority.VerbShare); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		target, err := s.shareTarget(to)
		if err != nil {
			return servers.Intent{}, err
		}
		pl := sharePayload{ID: art.ID, To: target, Role: role}
		if err := pl.check(art); err != nil {
			return servers.Intent{}, err
		}
		cur := slices.IndexFunc(art.Shares, func(sh share) bool { return strings.EqualFold(sh.To, target) })
		if (cur < 0 && role == authority.RoleNone) || (cur >= 0 && art.Shares[cur].Role == role) {
			return servers.Intent{}, nil // nothing to change
		}
		return servers.Intent{Kind: kindShare, Payload: pl, What: fmt.Sprintf("the share of %s to %s", art.ID, target)}, nil
	})
	if err != nil {
		return shareOut{}, err
	}
	out := shareOut{WriteOut: wo, ID: id, URL: s.url(id)}
	_ = s.w.View(func(r pebble.Reader) error {
		if art, err := readArtifact(r, id); err == nil && art != nil {
			for _, sh := range art.Shares {
				out.Shares = append(out.Shares, shareView{To: sh.To, Role: sh.Role.String()})
			}
		}
		return nil
	})
	return out, nil
}

func applyShare(a *applier) (any, error) {
	var pl sharePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := pl.check(old); err != nil {
		return nil, err
	}
	art := old.clone()
	art.Shares = slices.DeleteFunc(art.Shares, func(sh share) bool { return strings.EqualFold(sh.To, pl.To) })
	what := "withdrew the share of " + pl.To
	if pl.Role != authority.RoleNone {
		art.Shares = append(art.Shares, share{To: pl.To, Role: pl.Role, By: a.By.Seat, At: a.At()})
		what = fmt.Sprintf("shared with %s as %s", pl.To, pl.Role)
	}
	art.UpdatedAt = a.At()
	if err := a.put(art); err != nil {
		return nil, err
	}
	if err := a.history(art.ID, what, 0); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID}, nil
}
