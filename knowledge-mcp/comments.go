package knowledge

import (
	"context"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- comment_on_page ----

type commentIn struct {
	ID   string `json:"id" jsonschema:"the page's id (pg_...)"`
	Body string `json:"body" jsonschema:"the remark"`
	Edit int    `json:"edit,omitempty" jsonschema:"id of one of your own comments on this page to replace with body"`
	servers.OpIDArg
}

type commentAnswer struct {
	servers.WriteOut
	ID            string `json:"id,omitempty"`
	CommentID     int    `json:"comment_id,omitempty"`
	Version       int    `json:"version,omitempty"`
	AlreadyPosted bool   `json:"already_posted,omitempty"`
}

type commentPayload struct {
	ID   string `json:"id"`
	Body string `json:"body"`
	Edit int    `json:"edit,omitempty"`
}

func (s *srv) commentOnPage(ctx context.Context, c authority.Caller, in commentIn) (commentAnswer, error) {
	call, err := s.w.Begin(c, "comment_on_page", &in, false)
	if err != nil {
		return commentAnswer{}, err
	}
	// Nothing about the remark is reported if its outcome is unknown: not
	// its id (WR-2).
	wo, res, err := servers.Write[pageResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := s.pageFor(r, c, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		pl := commentPayload{ID: p.ID, Body: servers.Unfence(in.Body), Edit: in.Edit}
		if err := pl.check(p, servers.AuthorOf(c)); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindComment, Payload: pl, What: "the comment on " + p.ID}, nil
	})
	if err != nil {
		return commentAnswer{}, err
	}
	out := commentAnswer{WriteOut: wo, ID: in.ID}
	if res != nil {
		out.ID, out.CommentID, out.Version, out.AlreadyPosted = res.ID, res.CommentID, res.Version, res.AlreadyPosted
		if res.AlreadyPosted {
			out.Note = "This turn already posted a comment on this page; it is answered here instead of posting a second."
		}
	}
	return out, nil
}

// check is every rule a comment by who on p keeps; the tool and the
// projector both ask it.
func (pl commentPayload) check(p *page, who servers.Author) error {
	if strings.TrimSpace(pl.Body) == "" {
		return authority.Refuse(authority.Invalid, "body is empty; say something.")
	}
	if err := checkSize("body", pl.Body, maxComment); err != nil {
		return err
	}
	if err := checkOpen(p); err != nil {
		return err
	}
	dropping := 0
	if pl.Edit != 0 {
		c := commentOf(p, pl.Edit)
		switch {
		case c == nil:
			return authority.Refuse(authority.Invalid, "edit names comment %d, which %s does not have.", pl.Edit, p.ID)
		case c.By != who:
			return authority.Refuse(authority.Forbidden, "Comment %d on %s is %s's; only its writer replaces it. Add a comment of your own instead.", pl.Edit, p.ID, c.By.Seat)
		}
		dropping = len(c.Body)
	}
	return checkRoom(p, len(pl.Body), dropping)
}

func commentOf(p *page, id int) *pageComment {
	for i := range p.Comments {
		if p.Comments[i].ID == id {
			return &p.Comments[i]
		}
	}
	return nil
}

func applyComment(a *applier) (any, error) {
	var pl commentPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustPage(pl.ID)
	if err != nil {
		return nil, err
	}
	// One new comment per page per turn: a re-run turn whose model words
	// the remark differently still posts it once.
	turn := a.Op.Caller.TurnKey
	note := kTurnNote + old.ID + "/" + turn
	if turn != "" && pl.Edit == 0 {
		var prior int
		if found, err := state.GetJSON(a.R, note, &prior); err != nil {
			return nil, err
		} else if found {
			return pageResult{ID: old.ID, Container: old.Container, Title: old.Title, Version: old.Version, CommentID: prior, AlreadyPosted: true}, nil
		}
	}
	if err := pl.check(old, a.By); err != nil {
		return nil, err
	}
	p := clone(old)
	id := pl.Edit
	if id != 0 {
		c := commentOf(p, id)
		c.Body, c.Edited = pl.Body, true
	} else {
		id = len(p.Comments) + 1
		p.Comments = append(p.Comments, pageComment{ID: id, By: a.By, At: a.At(), Body: pl.Body})
		if turn != "" {
			if err := state.SetJSON(a.B, note, id); err != nil {
				return nil, err
			}
		}
	}
	if err := a.wakeWatchers(p, id); err != nil {
		return nil, err
	}
	if err := a.putPage(old, p); err != nil {
		return nil, err
	}
	return pageResult{ID: p.ID, Container: p.Container, Title: p.Title, Version: p.Version, CommentID: id}, nil
}
