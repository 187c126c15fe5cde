package tracker

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

// ---- comment_on_work_item ----

type commentIn struct {
	Key      string   `json:"key" jsonschema:"the item's key"`
	Body     string   `json:"body" jsonschema:"the remark; @handle mentions wake the seats they name"`
	Ask      string   `json:"ask,omitempty" jsonschema:"handle of somebody this comment puts a question to"`
	Decision []string `json:"decision,omitempty" jsonschema:"with ask: the options to choose between"`
	Answers  int      `json:"answers,omitempty" jsonschema:"with choice: id of the comment whose question this answers; 0 answers the item's own question"`
	Choice   string   `json:"choice,omitempty" jsonschema:"the option chosen, answering a question"`
	servers.OpIDArg
}

type commentAnswer struct {
	servers.WriteOut
	Key           string   `json:"key,omitempty"`
	CommentID     int      `json:"comment_id,omitempty"`
	Version       int      `json:"version,omitempty"`
	Mentions      []string `json:"mentions,omitempty"`
	AlreadyPosted bool     `json:"already_posted,omitempty"`
}

type commentPayload struct {
	Key      string    `json:"key"`
	Body     string    `json:"body"`
	Mentions []string  `json:"mentions,omitempty"`
	Ask      *question `json:"ask,omitempty"`
	Answers  int       `json:"answers,omitempty"`
	Choice   string    `json:"choice,omitempty"`
}

func (s *srv) commentOnWorkItem(ctx context.Context, c authority.Caller, in commentIn) (commentAnswer, error) {
	call, err := s.w.Begin(c, "comment_on_work_item", &in, false)
	if err != nil {
		return commentAnswer{}, err
	}
	// Nothing about the remark is reported if its outcome is unknown: not
	// its id, not whom it mentions, not its question (WR-2).
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		body := servers.Unfence(in.Body)
		if strings.TrimSpace(body) == "" && in.Choice == "" {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "body is empty; say something, or answer a question with choice.")
		}
		pl := commentPayload{Body: body, Mentions: s.mentions(body), Answers: in.Answers, Choice: in.Choice}
		if len(in.Decision) > 0 && in.Ask == "" {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "decision needs ask: the options belong to a question put to somebody.")
		}
		if err := checkOptions(in.Decision); err != nil {
			return servers.Intent{}, err
		}
		if in.Ask != "" {
			h, err := s.seatArg("ask", in.Ask)
			if err != nil {
				return servers.Intent{}, err
			}
			pl.Ask = &question{To: h, Text: body, Options: dedupe(in.Decision)}
		}
		it, err := readItem(r, in.Key)
		if err != nil {
			return servers.Intent{}, err
		}
		if it == nil {
			return servers.Intent{}, authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		if err := pl.check(it); err != nil {
			return servers.Intent{}, err
		}
		pl.Key = it.Key
		return servers.Intent{Kind: kindComment, Payload: pl, What: "the comment on " + it.Key}, nil
	})
	if err != nil {
		return commentAnswer{}, err
	}
	out := commentAnswer{WriteOut: wo, Key: strings.ToUpper(in.Key)}
	if res != nil {
		out.Key, out.CommentID, out.Version, out.Mentions, out.AlreadyPosted = res.Key, res.CommentID, res.Version, res.Mentions, res.AlreadyPosted
		if res.AlreadyPosted {
			out.Note = "This turn already posted a comment on this item; it is answered here instead of posting a second."
		}
	}
	return out, nil
}

// check refuses a comment on it past the board's bounds; the tool and the
// projector both ask it.
func (pl commentPayload) check(it *item) error {
	if err := checkSize("body", pl.Body, maxComment); err != nil {
		return err
	}
	return checkRoom(it, len(pl.Body), 0)
}

func applyComment(a *applier) (any, error) {
	var pl commentPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	// One comment per item per turn: a re-run turn whose model words the
	// remark differently still posts it once (TRK-4).
	// An answer is exempt: answering twice is refused already_answered, so a
	// re-run cannot double it, and a turn may both remark and answer.
	turn := a.Op.Caller.TurnKey
	if turn != "" && pl.Choice == "" {
		var prior int
		found, err := state.GetJSON(a.R, kTurnNote+old.ID+"/"+turn, &prior)
		if err != nil {
			return nil, err
		}
		if found {
			return itemResult{Key: old.Key, ID: old.ID, Version: old.Version, CommentID: prior, AlreadyPosted: true}, nil
		}
	}
	if err := pl.check(old); err != nil {
		return nil, err
	}
	it := clone(old)
	id := len(it.Thread) + 1
	c := comment{ID: id, By: a.By, At: a.At(), Body: pl.Body, Mentions: pl.Mentions, Ask: pl.Ask}
	if pl.Choice != "" {
		if err := answer(it, pl.Answers, pl.Choice, a.By.Seat); err != nil {
			return nil, err
		}
		c.Answers, c.Choice = pl.Answers, pl.Choice
	}
	it.Thread = append(it.Thread, c)
	it.Version++
	it.UpdatedAt = a.At()
	a.history(it, "thread", fmt.Sprintf("comment %d posted (%d bytes)", id, len(pl.Body)))
	if err := a.putItem(old, it); err != nil {
		return nil, err
	}
	if turn != "" && pl.Choice == "" {
		if err := state.SetJSON(a.B, kTurnNote+it.ID+"/"+turn, id); err != nil {
			return nil, err
		}
	}
	woken := slices.Clone(pl.Mentions)
	if pl.Ask != nil && !slices.Contains(woken, pl.Ask.To) {
		woken = append(woken, pl.Ask.To)
	}
	for _, m := range woken {
		why := "mentioned"
		if pl.Ask != nil && m == pl.Ask.To {
			why = "asked"
		}
		if err := a.wake(m, it, id, why); err != nil {
			return nil, err
		}
	}
	if err := a.activity("commented", it.Project, it.Key, fmt.Sprintf("comment %d on %s (%d bytes)", id, it.Key, len(pl.Body)), map[string]any{"comment": id, "body": pl.Body}); err != nil {
		return nil, err
	}
	return itemResult{Key: it.Key, ID: it.ID, Version: it.Version, CommentID: id, Mentions: pl.Mentions}, nil
}

// answer records choice as the answer to the question comment answers asks
// (0: the item's own question).
func answer(it *item, answers int, choice, by string) error {
	q, where := it.Question, "the item's own question"
	var target *comment
	if answers != 0 {
		where = fmt.Sprintf("comment %d", answers)
		q = nil
		for i := range it.Thread {
			if it.Thread[i].ID == answers {
				target = &it.Thread[i]
				q = target.Ask
			}
		}
	}
	if q == nil {
		return authority.Refuse(authority.Invalid, "answers names %s, which asks no question.", where)
	}
	if q.Answered {
		return authority.Refuse(authority.AlreadyAnswered, "%s on %s was already answered (%q, by %s); read the answer.", where, it.Key, q.Choice, q.AnswerBy)
	}
	if len(q.Options) > 0 && !slices.Contains(q.Options, choice) {
		return authority.Refuse(authority.Invalid, "choice %q is not one of the options of %s: %s.", choice, where, strings.Join(q.Options, ", "))
	}
	nq := *q
	nq.Answered, nq.Choice, nq.AnswerBy = true, choice, by
	if target != nil {
		target.Ask = &nq
	} else {
		it.Question = &nq
	}
	return nil
}
