package tracker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// Saved views (OPS-3): a filter of the board kept under a name, which
// every person sees. A view its owner protected is theirs alone to change
// or delete; an unprotected one is anybody's to rewrite, and keeps its
// owner.

const (
	maxViewName = 64
	// maxViews bounds the company's saved views, so list_views answers
	// all of them in one page.
	maxViews = 200
)

// viewFilter is what a view shows: list_work_items' filters.
type viewFilter struct {
	Project  string `json:"project,omitempty" jsonschema:"only this project's items"`
	Status   string `json:"status,omitempty" jsonschema:"only items in this status; open means every live item"`
	Assignee string `json:"assignee,omitempty" jsonschema:"only items assigned to this handle; me means whoever opens the view"`
	Label    string `json:"label,omitempty" jsonschema:"only items carrying this label"`
	Priority string `json:"priority,omitempty" jsonschema:"only items of this priority"`
}

type view struct {
	Name      string     `json:"name"`
	Owner     string     `json:"owner"`
	Protected bool       `json:"protected,omitempty"`
	Filter    viewFilter `json:"filter"`
	Version   int        `json:"version"`
	UpdatedBy string     `json:"updated_by"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func viewKey(name string) string { return kView + strings.ToLower(name) }

func readView(r pebble.Reader, name string) (*view, error) {
	var v view
	found, err := state.GetJSON(r, viewKey(name), &v)
	if err != nil || !found {
		return nil, err
	}
	return &v, nil
}

// checkViewWrite refuses a change to a view protected for somebody else.
// The tool asks it before writing and the projector again in log order.
func checkViewWrite(v *view, c authority.Caller, verb string) error {
	if v != nil && v.Protected && !strings.EqualFold(v.Owner, c.Seat) {
		return authority.Refuse(authority.Forbidden, "The view %q is protected for its owner, %s; only they may %s it. Ask them, or save your own under another name.", v.Name, v.Owner, verb).
			WithData("owner", v.Owner)
	}
	return nil
}

func checkViewName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return authority.Refuse(authority.Invalid, "name is empty; name the view.")
	case strings.ContainsAny(name, "\r\n\t"):
		return authority.Refuse(authority.Invalid, "name holds a line break or a tab; a view's name is one line.")
	}
	return checkSize("name", name, maxViewName)
}

// ---- list_views ----

type listViewsIn struct{}

type listViewsOut struct {
	Views []view `json:"views"`
}

func (s *srv) listViews(_ context.Context, c authority.Caller, _ listViewsIn) (listViewsOut, error) {
	if err := notASeat(c, "the saved views"); err != nil {
		return listViewsOut{}, err
	}
	out := listViewsOut{Views: []view{}}
	err := s.w.View(func(r pebble.Reader) error {
		return eachJSON(r, kView, func(v view) { out.Views = append(out.Views, v) })
	})
	return out, err
}

// ---- save_view ----

type saveViewIn struct {
	Name string `json:"name" jsonschema:"the view's name; saving under a name that exists rewrites that view"`
	viewFilter
	Protected bool `json:"protected,omitempty" jsonschema:"true: only you may change or delete the view"`
	servers.OpIDArg
}

type viewPayload struct {
	Name      string     `json:"name"`
	Filter    viewFilter `json:"filter"`
	Protected bool       `json:"protected,omitempty"`
	Delete    bool       `json:"delete,omitempty"`
}

type viewResult struct {
	Name    string `json:"name"`
	Owner   string `json:"owner,omitempty"`
	Version int    `json:"version,omitempty"`
}

type viewOut struct {
	servers.WriteOut
	viewResult
}

func (s *srv) saveView(ctx context.Context, c authority.Caller, in saveViewIn) (viewOut, error) {
	if err := notASeat(c, "saving a view"); err != nil {
		return viewOut{}, err
	}
	if err := checkViewName(in.Name); err != nil {
		return viewOut{}, err
	}
	call, err := s.w.Begin(c, "save_view", &in, true)
	if err != nil {
		return viewOut{}, err
	}
	pl := viewPayload{Name: strings.TrimSpace(in.Name), Filter: in.viewFilter, Protected: in.Protected}
	return s.writeView(ctx, c, call, pl, "save")
}

// ---- delete_view ----

type deleteViewIn struct {
	Name string `json:"name" jsonschema:"the view's name"`
	servers.OpIDArg
}

func (s *srv) deleteView(ctx context.Context, c authority.Caller, in deleteViewIn) (viewOut, error) {
	if err := notASeat(c, "deleting a view"); err != nil {
		return viewOut{}, err
	}
	call, err := s.w.Begin(c, "delete_view", &in, false)
	if err != nil {
		return viewOut{}, err
	}
	return s.writeView(ctx, c, call, viewPayload{Name: strings.TrimSpace(in.Name), Delete: true}, "delete")
}

func (s *srv) writeView(ctx context.Context, c authority.Caller, call *servers.Call, pl viewPayload, verb string) (viewOut, error) {
	wo, res, err := servers.Write[viewResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		v, err := readView(r, pl.Name)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := s.checkView(r, v, c, pl, verb); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindView, Payload: pl, What: fmt.Sprintf("the %s of the view %q", verb, pl.Name)}, nil
	})
	if err != nil {
		return viewOut{}, err
	}
	out := viewOut{WriteOut: wo, viewResult: viewResult{Name: pl.Name}}
	if res != nil {
		out.viewResult = *res
	}
	return out, nil
}

// checkView refuses a view write before it is made: a filter that names
// nothing the board has, a view that is not there to delete, one
// protected for somebody else, one too many.
func (s *srv) checkView(r pebble.Reader, v *view, c authority.Caller, pl viewPayload, verb string) error {
	if pl.Delete {
		if v == nil {
			return authority.Refuse(authority.NotFound, "No saved view is called %q (list_views shows them).", pl.Name)
		}
		return checkViewWrite(v, c, verb)
	}
	if err := checkViewWrite(v, c, verb); err != nil {
		return err
	}
	if v == nil {
		n := 0
		if err := eachJSON(r, kView, func(view) { n++ }); err != nil {
			return err
		}
		if n >= maxViews {
			return authority.Refuse(authority.Invalid, "The company already keeps %d saved views, the most it keeps; delete one first.", n)
		}
	}
	f := pl.Filter
	cat, err := readCatalogue(r)
	if err != nil {
		return err
	}
	if f.Status != "" && f.Status != openFilter {
		if err := cat.checkStatus(f.Status); err != nil {
			return err
		}
	}
	if err := cat.checkPriority(f.Priority); err != nil {
		return err
	}
	if f.Assignee != "" && !strings.EqualFold(f.Assignee, "me") {
		if _, err := s.seatArg("assignee", f.Assignee); err != nil {
			return err
		}
	}
	if err := checkSize("project", f.Project, maxViewName); err != nil {
		return err
	}
	return checkSize("label", f.Label, maxViewName)
}

func applyView(a *applier) (any, error) {
	var pl viewPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	v, err := readView(a.R, pl.Name)
	if err != nil {
		return nil, err
	}
	verb := "save"
	if pl.Delete {
		verb = "delete"
		if v == nil {
			return nil, authority.Refuse(authority.NotFound, "No saved view is called %q (list_views shows them).", pl.Name)
		}
	}
	if err := checkViewWrite(v, a.Op.Caller, verb); err != nil {
		return nil, err
	}
	if pl.Delete {
		if err := a.B.Delete([]byte(viewKey(pl.Name)), nil); err != nil {
			return nil, err
		}
		return viewResult{Name: v.Name, Owner: v.Owner}, a.activity("view_deleted", "", "", fmt.Sprintf("deleted the saved view %q", v.Name), nil)
	}
	next := view{Name: pl.Name, Owner: a.By.Seat, Protected: pl.Protected, Filter: pl.Filter, Version: 1, UpdatedBy: a.By.Seat, UpdatedAt: a.At()}
	if v != nil {
		// A rewrite keeps the view's owner and its name's spelling.
		next.Name, next.Owner, next.Version = v.Name, v.Owner, v.Version+1
	}
	if err := state.SetJSON(a.B, viewKey(pl.Name), next); err != nil {
		return nil, err
	}
	return viewResult{Name: next.Name, Owner: next.Owner, Version: next.Version}, a.activity("view_saved", "", "", fmt.Sprintf("saved the view %q", next.Name), nil)
}
