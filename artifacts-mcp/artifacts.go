package artifacts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- create_artifact ----

type createIn struct {
	Kind        string             `json:"kind" jsonschema:"html, doc, slides, dashboard or sheet"`
	Title       string             `json:"title" jsonschema:"the artifact's title, one line"`
	Description string             `json:"description,omitempty" jsonschema:"what it is for"`
	Icon        string             `json:"icon,omitempty" jsonschema:"an emoji or icon name"`
	Main        string             `json:"main,omitempty" jsonschema:"the file its URL opens; by default index.html for html, index.md for doc, slides.md, dashboard.json, sheet.json"`
	Content     string             `json:"content,omitempty" jsonschema:"the main file's whole text"`
	Files       map[string]*fileIn `json:"files,omitempty" jsonschema:"more files by path (css/site.css), each its content or base64"`
	Source      *sourceIn          `json:"source,omitempty" jsonschema:"streamed files instead of inline ones: a project's file or directory, or the turn's coding run"`
	Assets      bool               `json:"assets,omitempty" jsonschema:"declare the assets capability: images, data files and fonts added with upload_artifact_asset"`
	servers.OpIDArg
}

// artifactOut is what an artifact write answers: every answer carries the
// URL the artifact is viewed at.
type artifactOut struct {
	servers.WriteOut
	ID      string   `json:"id,omitempty"`
	Version int      `json:"version,omitempty"`
	URL     string   `json:"url,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Role    string   `json:"role,omitempty"`
}

type createPayload struct {
	Kind        string             `json:"kind"`
	Title       string             `json:"title"`
	Description string             `json:"description,omitempty"`
	Icon        string             `json:"icon,omitempty"`
	Main        string             `json:"main"`
	Assets      bool               `json:"assets,omitempty"`
	Files       map[string]fileRef `json:"files"`
	// Editor is the person who asked an agent for the artifact, made its
	// editor.
	Editor string `json:"editor,omitempty"`
	Bytes  int64  `json:"bytes"`
}

// check is every rule a new artifact keeps; the tool and the projector
// both ask it.
func (pl *createPayload) check() error {
	if _, ok := kinds[pl.Kind]; !ok {
		return authority.Refuse(authority.Invalid, "kind %q is not one of %s.", pl.Kind, strings.Join(kindNames, ", ")).WithData("argument", "kind")
	}
	if strings.TrimSpace(pl.Title) == "" {
		return authority.Refuse(authority.Invalid, "title is empty; an artifact needs one.").WithData("argument", "title")
	}
	if err := checkMeta(&pl.Title, &pl.Description, &pl.Icon); err != nil {
		return err
	}
	if len(pl.Files) > maxFiles {
		return authority.Refuse(authority.Invalid, "a version holds at most %d files, and this one would hold %d.", maxFiles, len(pl.Files)).WithData("limit", maxFiles)
	}
	return nil
}

func checkMeta(title, description, icon *string) error {
	if title != nil {
		if err := checkText("title", *title, maxTitle, true); err != nil {
			return err
		}
	}
	if description != nil {
		if err := checkText("description", *description, maxDescription, false); err != nil {
			return err
		}
	}
	if icon != nil {
		return checkText("icon", *icon, maxIcon, true)
	}
	return nil
}

func (s *srv) createArtifact(ctx context.Context, c authority.Caller, in createIn) (artifactOut, error) {
	if err := s.checkRequester(c); err != nil {
		return artifactOut{}, err
	}
	fresh := isFresh(c, in.OpID)
	call, err := s.w.Begin(c, "create_artifact", &in, false)
	if err != nil {
		return artifactOut{}, err
	}
	wo, res, err := servers.Write[artifactResult](ctx, s.w, call, func(r pebble.Reader) (intent servers.Intent, err error) {
		pl := createPayload{Kind: in.Kind, Title: strings.TrimSpace(servers.Unfence(in.Title)), Description: servers.Unfence(in.Description), Icon: in.Icon, Assets: in.Assets}
		pl.Main = kinds[in.Kind]
		if pl.Main == "" {
			pl.Main = "index.html"
		}
		if in.Main != "" {
			if pl.Main, err = cleanPath("main", in.Main); err != nil {
				return servers.Intent{}, err
			}
		}
		if err := pl.check(); err != nil {
			return servers.Intent{}, err
		}
		q, err := quotaOf(r, c)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkPublish(q, "", true, 0); err != nil {
			return servers.Intent{}, err
		}
		st := s.stager(ctx, call, fresh)
		defer func() {
			if err != nil {
				st.discard()
			}
		}()
		pl.Files = map[string]fileRef{}
		if in.Source != nil {
			if in.Content != "" || len(in.Files) > 0 {
				return servers.Intent{}, authority.Refuse(authority.Invalid, "source brings the whole version; send content and files without it, or source alone.").WithData("argument", "source")
			}
			if pl.Files, err = st.fromSource(r, in.Source, pl.Main); err != nil {
				return servers.Intent{}, err
			}
		} else {
			staged, err := st.inlineFiles(pl.Main, in.Content, in.Files, false)
			if err != nil {
				return servers.Intent{}, err
			}
			for p, f := range staged {
				pl.Files[p] = *f
			}
		}
		pl.Bytes = st.bytes
		if err := checkPublish(q, "", true, pl.Bytes); err != nil {
			return servers.Intent{}, err
		}
		// The person who asked an agent for it can edit what was made for
		// them.
		if rel, req := s.requesterOf(c); rel == authority.RequesterKnown {
			if seat, ok := s.dir().Seat(req); ok && seat.Kind == authority.SeatHuman {
				pl.Editor = seat.Handle
			}
		}
		return servers.Intent{Kind: kindCreate, Payload: pl, What: fmt.Sprintf("the artifact %q", pl.Title)}, nil
	})
	if err != nil {
		return artifactOut{}, err
	}
	out := artifactOut{WriteOut: wo}
	if res != nil {
		out.ID, out.Version, out.URL, out.Role = res.ID, res.Version, s.url(res.ID), authority.RoleOwner.String()
		s.enter(ctx, c, res.ID, editing, "version 1")
	}
	return out, nil
}

func applyCreate(a *applier) (any, error) {
	var pl createPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	if err := pl.check(); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("art_%x", a.Pos)
	if err := a.countPublish(id, true, pl.Bytes); err != nil {
		return nil, err
	}
	art := &artifact{ID: id, Kind: pl.Kind, Title: pl.Title, Description: pl.Description, Icon: pl.Icon, Main: pl.Main,
		Owner: a.By, Assets: pl.Assets, Head: 1, Writers: []servers.Author{a.By}, CreatedAt: a.At(), UpdatedAt: a.At()}
	if pl.Editor != "" && !strings.EqualFold(pl.Editor, a.By.Seat) {
		art.Shares = []share{{To: pl.Editor, Role: authority.RoleEditor, By: a.By.Seat, At: a.At()}}
	}
	v := &version{N: 1, By: a.By, At: a.At(), Files: pl.Files}
	for p, f := range pl.Files {
		v.Changed = append(v.Changed, p)
		if err := a.hold(id, f.Blob); err != nil {
			return nil, err
		}
	}
	slices.Sort(v.Changed)
	if err := state.SetJSON(a.B, versionKey(id, 1), v); err != nil {
		return nil, err
	}
	if err := a.put(art); err != nil {
		return nil, err
	}
	what := "created"
	if pl.Editor != "" {
		what += ", and @" + pl.Editor + " who asked for it made its editor"
	}
	if err := a.history(id, what, 1); err != nil {
		return nil, err
	}
	return artifactResult{ID: id, Version: 1}, nil
}

// ---- update_artifact ----

type updateIn struct {
	ID          string  `json:"id" jsonschema:"the artifact's id (art_...)"`
	Title       *string `json:"title,omitempty" jsonschema:"a new title, one line"`
	Description *string `json:"description,omitempty" jsonschema:"a new description"`
	Icon        *string `json:"icon,omitempty" jsonschema:"a new icon"`
	Version     int     `json:"version,omitempty" jsonschema:"a version to label"`
	Label       *string `json:"label,omitempty" jsonschema:"the label for version; empty removes it"`
	servers.OpIDArg
}

type updatePayload struct {
	ID          string  `json:"id"`
	Title       *string `json:"title,omitempty"`
	Description *string `json:"description,omitempty"`
	Icon        *string `json:"icon,omitempty"`
	Version     int     `json:"version,omitempty"`
	Label       *string `json:"label,omitempty"`
}

// check is every rule an update keeps; the tool and the projector both
// ask it.
func (pl *updatePayload) check(r pebble.Reader, art *artifact) error {
	if err := checkMeta(pl.Title, pl.Description, pl.Icon); err != nil {
		return err
	}
	if pl.Title != nil && strings.TrimSpace(*pl.Title) == "" {
		return authority.Refuse(authority.Invalid, "title is empty; an artifact needs one.").WithData("argument", "title")
	}
	if (pl.Label != nil) != (pl.Version != 0) {
		return authority.Refuse(authority.Invalid, "version and label go together: name the version to label and its label.").WithData("argument", "label")
	}
	if pl.Label != nil {
		if err := checkText("label", *pl.Label, maxLabel, true); err != nil {
			return err
		}
		v, err := readVersion(r, art.ID, pl.Version)
		if err != nil {
			return err
		}
		if v == nil {
			return authority.Refuse(authority.Invalid, "version %d is no version of %s (it is at %d).", pl.Version, art.ID, art.Head).WithData("argument", "version")
		}
	}
	if pl.Title == nil && pl.Description == nil && pl.Icon == nil && pl.Label == nil {
		return authority.Refuse(authority.Invalid, "Name something to change: title, description, icon, or a version and its label.")
	}
	return nil
}

func (s *srv) updateArtifact(ctx context.Context, c authority.Caller, in updateIn) (artifactOut, error) {
	call, err := s.w.Begin(c, "update_artifact", &in, true)
	if err != nil {
		return artifactOut{}, err
	}
	wo, res, err := servers.Write[artifactResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if _, err := s.decide(c, art, in.ID, authority.VerbUpdate); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		pl := updatePayload{ID: art.ID, Icon: in.Icon, Version: in.Version, Label: in.Label}
		if in.Title != nil {
			t := strings.TrimSpace(servers.Unfence(*in.Title))
			pl.Title = &t
		}
		if in.Description != nil {
			d := servers.Unfence(*in.Description)
			pl.Description = &d
		}
		if err := pl.check(r, art); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindUpdate, Payload: pl, What: "the update of " + art.ID}, nil
	})
	if err != nil {
		return artifactOut{}, err
	}
	out := artifactOut{WriteOut: wo, ID: in.ID, URL: s.url(in.ID)}
	if res != nil {
		out.Version, out.Changed = res.Version, res.Changed
		s.enter(ctx, c, in.ID, editing, focusVersion(in.Version))
	}
	return out, nil
}

func focusVersion(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("version %d", n)
}

func applyUpdate(a *applier) (any, error) {
	var pl updatePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := pl.check(a.R, old); err != nil {
		return nil, err
	}
	art := old.clone()
	var changed []string
	set := func(field string, dst *string, v *string) {
		if v != nil && *v != *dst {
			*dst = *v
			changed = append(changed, field)
		}
	}
	set("title", &art.Title, pl.Title)
	set("description", &art.Description, pl.Description)
	set("icon", &art.Icon, pl.Icon)
	if slices.Contains(changed, "title") || slices.Contains(changed, "description") {
		art.Writers = addWriter(art.Writers, a.By)
	}
	if pl.Label != nil {
		v, err := readVersion(a.R, art.ID, pl.Version)
		if err != nil {
			return nil, err
		}
		if v.Label != *pl.Label {
			v.Label = *pl.Label
			changed = append(changed, fmt.Sprintf("label of version %d", v.N))
			if err := state.SetJSON(a.B, versionKey(art.ID, v.N), v); err != nil {
				return nil, err
			}
		}
	}
	if len(changed) > 0 {
		art.UpdatedAt = a.At()
		if err := a.put(art); err != nil {
			return nil, err
		}
		if err := a.history(art.ID, "changed "+strings.Join(changed, ", "), 0); err != nil {
			return nil, err
		}
	}
	return artifactResult{ID: art.ID, Version: art.Head, Changed: changed}, nil
}
