package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- list_projects / get_project ----

type projectOut struct {
	Key             string         `json:"key"`
	Name            string         `json:"name"`
	Unit            string         `json:"unit,omitempty"`
	Lead            string         `json:"lead,omitempty"`
	DefaultAssignee string         `json:"default_assignee,omitempty"`
	Labels          []string       `json:"labels,omitempty"`
	Items           map[string]int `json:"items_by_status,omitempty"`
	Version         int            `json:"version"`
	Yours           bool           `json:"yours,omitempty"`
}

type listProjectsIn struct{}

type listProjectsOut struct {
	Projects []projectOut `json:"projects"`
}

// projects answers every project: those the directory's units declare (a
// project exists from its declaration, before anything is filed in it) and
// any the board holds beyond them.
func (s *srv) projects(r pebble.Reader, c authority.Caller) ([]projectOut, error) {
	mine := ""
	if seat, ok := s.dir().Seat(c.Seat); ok {
		if u, ok := s.dir().Unit(seat.Unit); ok {
			mine = strings.ToUpper(u.Project)
		}
	}
	byKey := map[string]projectOut{}
	for _, u := range s.dir().Units() {
		if u.Project == "" {
			continue
		}
		d := declOf(u)
		byKey[d.Key] = projectOut{Key: d.Key, Name: d.Name, Unit: d.Unit, Lead: d.Lead}
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kProject), UpperBound: state.Upper(kProject)})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		var p project
		if err := state.DecodeJSON(it.Key(), it.Value(), &p); err != nil {
			it.Close()
			return nil, err
		}
		o := byKey[p.Key]
		o.Key, o.DefaultAssignee, o.Labels, o.Items, o.Version = p.Key, p.DefaultAssignee, p.Labels, p.Counts, p.Version
		o.Name = p.Name
		if o.Unit == "" {
			o.Unit, o.Lead = p.Unit, s.lead(projectDecl{Key: p.Key, Lead: p.Lead})
		}
		byKey[p.Key] = o
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	out := make([]projectOut, 0, len(byKey))
	for _, p := range byKey {
		p.Yours = p.Key == mine
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *srv) listProjects(_ context.Context, c authority.Caller, _ listProjectsIn) (listProjectsOut, error) {
	var out listProjectsOut
	err := s.w.View(func(r pebble.Reader) error {
		ps, err := s.projects(r, c)
		out.Projects = ps
		return err
	})
	return out, err
}

type getProjectIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
}

func (s *srv) getProject(_ context.Context, c authority.Caller, in getProjectIn) (projectOut, error) {
	var out projectOut
	err := s.w.View(func(r pebble.Reader) error {
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			if in.Project != "" && errors.Is(err, authority.ErrInvalid) {
				return authority.Refuse(authority.NotFound, "No project has the key %s (list_projects shows them).", strings.ToUpper(in.Project))
			}
			return err
		}
		ps, err := s.projects(r, c)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Key == d.Key {
				out = p
			}
		}
		return nil
	})
	return out, err
}

// ---- write_project ----

type writeProjectIn struct {
	Project         string    `json:"project" jsonschema:"project key"`
	Name            *string   `json:"name,omitempty" jsonschema:"the project's display name (lead only)"`
	DefaultAssignee *string   `json:"default_assignee,omitempty" jsonschema:"handle that new unassigned items go to; empty sends them to triage for the lead (lead only)"`
	Labels          *[]string `json:"labels,omitempty" jsonschema:"the project's whole set of labels; anybody may add labels, removing one is the lead's"`
	servers.OpIDArg
}

type writeProjectOut struct {
	servers.WriteOut
	Project string   `json:"project,omitempty"`
	Version int      `json:"version,omitempty"`
	Labels  []string `json:"labels,omitempty"`
}

type projectPayload struct {
	Project         projectDecl `json:"project"`
	Name            *string     `json:"name,omitempty"`
	DefaultAssignee *string     `json:"default_assignee,omitempty"`
	Labels          *[]string   `json:"labels,omitempty"`
	AddLabels       []string    `json:"add_labels,omitempty"`
}

type projectResult struct {
	Key     string   `json:"key"`
	Version int      `json:"version"`
	Labels  []string `json:"labels,omitempty"`
	Added   []string `json:"added,omitempty"`
}

func (s *srv) writeProject(ctx context.Context, c authority.Caller, in writeProjectIn) (writeProjectOut, error) {
	call, err := s.w.Begin(c, "write_project", &in, true)
	if err != nil {
		return writeProjectOut{}, err
	}
	wo, res, err := servers.Write[projectResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		pl, err := s.decideProject(r, c, in)
		if err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindProject, Payload: pl, What: "the project write"}, nil
	})
	if err != nil {
		return writeProjectOut{}, err
	}
	out := writeProjectOut{WriteOut: wo, Project: strings.ToUpper(in.Project)}
	if res != nil {
		out.Project, out.Version, out.Labels = res.Key, res.Version, res.Labels
	}
	return out, nil
}

// decideProject checks a project write against the caller's authority:
// anybody may add a label; renaming, the default assignee and removing a
// label are the lead's.
func (s *srv) decideProject(r pebble.Reader, c authority.Caller, in writeProjectIn) (projectPayload, error) {
	if strings.TrimSpace(in.Project) == "" {
		return projectPayload{}, authority.Refuse(authority.Invalid, "project is empty; name the project to write.")
	}
	d, p, err := s.resolveProject(r, c, in.Project)
	if err != nil {
		return projectPayload{}, err
	}
	pl := projectPayload{Project: d, Name: in.Name, DefaultAssignee: in.DefaultAssignee}
	if in.Name != nil {
		if err := checkSize("name", *in.Name, maxProjectName); err != nil {
			return projectPayload{}, err
		}
	}
	lead := s.mayLead(c, d)
	if (in.Name != nil || in.DefaultAssignee != nil) && !lead {
		return projectPayload{}, authority.Refuse(authority.Forbidden, "Only %s's lead (%s) may rename it or set its default assignee; ask them.", d.Key, orNone(s.lead(d)))
	}
	if in.DefaultAssignee != nil && *in.DefaultAssignee != "" {
		h, err := s.seatArg("default_assignee", *in.DefaultAssignee)
		if err != nil {
			return projectPayload{}, err
		}
		pl.DefaultAssignee = &h
	}
	if in.Labels != nil {
		labels := dedupe(*in.Labels)
		if err := checkLabelNames(labels); err != nil {
			return projectPayload{}, err
		}
		if len(labels) > maxProjectLabels {
			return projectPayload{}, authority.Refuse(authority.Invalid, "labels lists %d labels; a project declares at most %d.", len(labels), maxProjectLabels)
		}
		if p != nil && !lead {
			for _, l := range p.Labels {
				if !slices.Contains(labels, l) {
					return projectPayload{}, authority.Refuse(authority.Forbidden, "labels leaves out %q; removing a label is %s's lead's (%s). Send the whole set with it kept.", l, d.Key, orNone(s.lead(d)))
				}
			}
		}
		if labels == nil {
			labels = []string{}
		}
		pl.Labels = &labels
	}
	return pl, nil
}

// declareLabels is the step a write with labels_create_missing makes
// before its own (WR-7): the labels declared on the project. notMade says,
// in the call's own words, what did not happen if the call stops there.
func declareLabels(decl projectDecl, labels []string, tool, notMade string) (servers.Step, error) {
	if err := checkLabelNames(labels); err != nil {
		return servers.Step{}, err
	}
	return servers.Step{
		Name: "declare_labels",
		Args: map[string]any{"project": decl.Key, "labels": labels},
		Intent: servers.Intent{
			Kind: kindProject, Payload: projectPayload{Project: decl, AddLabels: labels},
			What:      "the label declaration this call makes first",
			IfUnknown: notMade + ": the call stopped before its own write. ",
			CannotTell: fmt.Sprintf("%s: this call declares its labels first, and this node cannot tell whether that declaration landed. Declare %s on %s with write_project first, which is harmless if they already landed, then make the same %s call, which will then make its own write once.",
				notMade, strings.Join(labels, ", "), decl.Key, tool),
		},
	}, nil
}

func applyProject(a *applier) (any, error) {
	var pl projectPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	if pl.Name != nil {
		p.Name = *pl.Name
	}
	if pl.DefaultAssignee != nil {
		p.DefaultAssignee = *pl.DefaultAssignee
	}
	if pl.Labels != nil {
		p.Labels = slices.Clone(*pl.Labels)
	}
	var added []string
	for _, l := range pl.AddLabels {
		if !slices.Contains(p.Labels, l) {
			p.Labels = append(p.Labels, l)
			added = append(added, l)
		}
	}
	slices.Sort(p.Labels)
	p.Version++
	if err := a.putProject(p); err != nil {
		return nil, err
	}
	if err := a.activity("project_written", p.Key, "", "wrote project "+p.Key, pl); err != nil {
		return nil, err
	}
	return projectResult{Key: p.Key, Version: p.Version, Labels: p.Labels, Added: added}, nil
}
