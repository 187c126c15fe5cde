package knowledge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// ---- write_page ----

type writeIn struct {
	Container string `json:"container,omitempty" jsonschema:"a unit's space, e.g. CORE; defaults to your own unit's"`
	Title     string `json:"title" jsonschema:"the page's title: its address, unique in its container, one line"`
	Body      string `json:"body,omitempty" jsonschema:"the page's text (markdown); link a page as [its title](#/knowledge/pages/<page id>); empty makes a folder page"`
	Parent    string `json:"parent,omitempty" jsonschema:"id of the page this one sits under, in the same container"`
	Status    string `json:"status,omitempty" jsonschema:"published (the default) or draft"`
	Watch     bool   `json:"watch,omitempty" jsonschema:"true to follow the page from the start"`
	servers.OpIDArg
}

type pageOut struct {
	servers.WriteOut
	ID        string   `json:"id,omitempty"`
	Container string   `json:"container,omitempty"`
	Title     string   `json:"title,omitempty"`
	Version   int      `json:"version,omitempty"`
	Status    string   `json:"status,omitempty"`
	Changed   []string `json:"changed,omitempty"`
}

type writePayload struct {
	Container string `json:"container"`
	Title     string `json:"title"`
	Body      string `json:"body,omitempty"`
	Parent    string `json:"parent,omitempty"`
	Status    string `json:"status"`
	Watch     bool   `json:"watch,omitempty"`
}

func (s *srv) writePage(ctx context.Context, c authority.Caller, in writeIn) (pageOut, error) {
	call, err := s.w.Begin(c, "write_page", &in, false)
	if err != nil {
		return pageOut{}, err
	}
	wo, res, err := servers.Write[pageResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		container, err := s.resolveContainer(c, in.Container)
		if err != nil {
			return servers.Intent{}, err
		}
		status, err := checkStatus(in.Status)
		if err != nil {
			return servers.Intent{}, err
		}
		pl := writePayload{Container: container, Title: strings.TrimSpace(in.Title), Body: servers.Unfence(in.Body), Parent: in.Parent, Status: status, Watch: in.Watch}
		if err := pl.check(r); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindWrite, Payload: pl, What: fmt.Sprintf("the page %q", pl.Title)}, nil
	})
	if err != nil {
		return pageOut{}, err
	}
	out := pageOut{WriteOut: wo}
	if res != nil {
		out.ID, out.Container, out.Title, out.Version, out.Status = res.ID, res.Container, res.Title, res.Version, res.Status
	}
	return out, nil
}

// check is every rule a new page keeps; the tool and the projector both
// ask it.
func (pl *writePayload) check(r pebble.Reader) error {
	if err := checkTitle(pl.Title); err != nil {
		return err
	}
	if err := checkSize("body", pl.Body, maxBody); err != nil {
		return err
	}
	if _, err := checkStatus(pl.Status); err != nil {
		return err
	}
	if err := checkTitleFree(r, pl.Container, pl.Title, ""); err != nil {
		return err
	}
	if pl.Parent != "" {
		id, err := checkParent(r, pl.Container, pl.Parent, nil)
		if err != nil {
			return err
		}
		pl.Parent = id
	}
	return nil
}

func applyWrite(a *applier) (any, error) {
	var pl writePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	if err := pl.check(a.R); err != nil {
		return nil, err
	}
	p := &page{ID: fmt.Sprintf("pg_%x", a.Pos), Container: pl.Container, Title: pl.Title, Parent: pl.Parent, Status: pl.Status,
		Body: pl.Body, WrittenBy: []servers.Author{a.By}, Links: linksIn(pl.Body), Version: 1,
		CreatedBy: a.By, CreatedAt: a.At(), UpdatedAt: a.At()}
	if pl.Watch {
		p.Watchers = []string{a.By.Seat}
	}
	what := "created"
	if p.Body == "" {
		what = "created as a folder"
	}
	a.history(p, what, nil)
	if err := a.putPage(nil, p); err != nil {
		return nil, err
	}
	return pageResult{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version, Status: p.Status}, nil
}

// ---- save_page ----

type saveIn struct {
	ID      string  `json:"id" jsonschema:"the page's id (pg_...)"`
	Version int     `json:"version" jsonschema:"the version you read; the edit is refused if the page changed since"`
	Title   *string `json:"title,omitempty" jsonschema:"a new title, free in the page's container"`
	Body    *string `json:"body,omitempty" jsonschema:"the whole new text of the page"`
	Status  *string `json:"status,omitempty" jsonschema:"published or draft"`
	Parent  *string `json:"parent,omitempty" jsonschema:"id of the page to move it under, in the same container; empty moves it to the container's top"`
	Watch   *bool   `json:"watch,omitempty" jsonschema:"true to follow the page, false to stop following it"`
	servers.OpIDArg
}

type savePayload struct {
	ID      string  `json:"id"`
	Version int     `json:"version"`
	Title   *string `json:"title,omitempty"`
	Body    *string `json:"body,omitempty"`
	Status  *string `json:"status,omitempty"`
	Parent  *string `json:"parent,omitempty"`
	Watch   *bool   `json:"watch,omitempty"`
}

func (s *srv) savePage(ctx context.Context, c authority.Caller, in saveIn) (pageOut, error) {
	call, err := s.w.Begin(c, "save_page", &in, false)
	if err != nil {
		return pageOut{}, err
	}
	wo, res, err := servers.Write[pageResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := s.pageFor(r, c, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		pl := savePayload{ID: p.ID, Version: in.Version, Title: in.Title, Status: in.Status, Parent: in.Parent, Watch: in.Watch}
		if in.Body != nil {
			b := servers.Unfence(*in.Body)
			pl.Body = &b
		}
		if in.Title != nil {
			t := strings.TrimSpace(*in.Title)
			pl.Title = &t
		}
		if err := pl.check(r, p); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindSave, Payload: pl, What: "the edit of " + p.ID}, nil
	})
	if err != nil {
		return pageOut{}, err
	}
	out := pageOut{WriteOut: wo, ID: in.ID}
	if res != nil {
		out.ID, out.Container, out.Title, out.Version, out.Status, out.Changed = res.ID, res.Container, res.Title, res.Version, res.Status, res.Changed
	}
	return out, nil
}

// check is every rule an edit of p keeps; the tool and the projector both
// ask it.
func (pl *savePayload) check(r pebble.Reader, p *page) error {
	if err := checkOpen(p); err != nil {
		return err
	}
	if err := checkVersion(p, pl.Version); err != nil {
		return err
	}
	if pl.Title != nil {
		if err := checkTitle(*pl.Title); err != nil {
			return err
		}
		if err := checkTitleFree(r, p.Container, *pl.Title, p.ID); err != nil {
			return err
		}
	}
	if pl.Status != nil {
		if _, err := checkStatus(*pl.Status); err != nil {
			return err
		}
	}
	if pl.Parent != nil && *pl.Parent != "" {
		id, err := checkParent(r, p.Container, *pl.Parent, p)
		if err != nil {
			return err
		}
		pl.Parent = &id
	}
	if pl.Body != nil {
		if err := checkSize("body", *pl.Body, maxBody); err != nil {
			return err
		}
		return checkRoom(p, len(*pl.Body), len(p.Body))
	}
	return nil
}

func applySave(a *applier) (any, error) {
	var pl savePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustPage(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := pl.check(a.R, old); err != nil {
		return nil, err
	}
	p := clone(old)
	var changed []string
	if pl.Title != nil && *pl.Title != p.Title {
		p.Title = *pl.Title
		changed = append(changed, "title")
	}
	if pl.Body != nil && *pl.Body != p.Body {
		p.Body, p.Links = *pl.Body, linksIn(*pl.Body)
		changed = append(changed, "body")
	}
	if pl.Status != nil && *pl.Status != p.Status {
		p.Status = *pl.Status
		changed = append(changed, "status")
	}
	if pl.Parent != nil && *pl.Parent != p.Parent {
		p.Parent = *pl.Parent
		changed = append(changed, "parent")
	}
	if pl.Watch != nil {
		following := slices.Contains(p.Watchers, a.By.Seat)
		switch {
		case *pl.Watch && !following:
			p.Watchers = append(p.Watchers, a.By.Seat)
		case !*pl.Watch && following:
			p.Watchers = slices.DeleteFunc(p.Watchers, func(s string) bool { return s == a.By.Seat })
		}
	}
	// Following or not is the caller's own business: it moves no version,
	// so it makes nobody's read stale.
	if len(changed) > 0 {
		if (slices.Contains(changed, "title") || slices.Contains(changed, "body")) && !slices.Contains(p.WrittenBy, a.By) {
			p.WrittenBy = append(p.WrittenBy, a.By)
		}
		p.Version++
		p.UpdatedAt = a.At()
		a.history(p, "changed "+strings.Join(changed, ", "), changed)
		if err := a.wakeWatchers(p, 0); err != nil {
			return nil, err
		}
	}
	if err := a.putPage(old, p); err != nil {
		return nil, err
	}
	return pageResult{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version, Status: p.Status, Changed: changed}, nil
}

// ---- the trash ----

// trashPayload puts a page in the trash or takes it out. No seat tool
// writes it: the trash is a person's, from the dashboard (Store.Trash) and
// on the operator surface (restore_from_trash, OPS-3);
// the projector is here because the rules of the knowledge base depend on
// what is in the trash (a trashed page is no parent and takes no edit).
type trashPayload struct {
	ID      string `json:"id"`
	Restore bool   `json:"restore,omitempty"`
}

func applyTrash(a *applier) (any, error) {
	var pl trashPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustPage(pl.ID)
	if err != nil {
		return nil, err
	}
	p := clone(old)
	if p.Trashed == !pl.Restore {
		return pageResult{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version}, nil
	}
	p.Trashed = !pl.Restore
	p.Version++
	p.UpdatedAt = a.At()
	what := trashedChange
	if pl.Restore {
		what = "restored from the trash"
	}
	a.history(p, what, nil)
	if err := a.putPage(old, p); err != nil {
		return nil, err
	}
	return pageResult{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version}, nil
}
