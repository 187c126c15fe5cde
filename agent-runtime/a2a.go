package agent

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

// a2a_ask puts one question to one AI colleague over the engine's private
// channel: the question is written to the log, where it leaves a wake row
// in the runtime's own feed, the colleague's turn answers it, and the
// asking call waits for that turn's end. A re-run of the asking turn asks
// the same question once: the ask is a write derived from the turn.

// A2AFeedName names the runtime's own wake feed.
const A2AFeedName = "a2a"

// askWait bounds how long a2a_ask waits for the colleague's answer.
const askWait = 10 * time.Minute

type askPayload struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Question  string `json:"question"`
	AskerTurn string `json:"asker_turn"`
}

// askRow is one question as the projection keeps it.
type askRow struct {
	askPayload
	// Turn is the colleague's turn that answers it.
	Turn string    `json:"turn"`
	At   time.Time `json:"at"`
}

type askResult struct {
	ID   string `json:"id"`
	Turn string `json:"turn"`
}

func applyAsk(a *servers.Apply) (any, error) {
	var p askPayload
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	cursor := fmt.Sprintf("%016x/%04d", a.Pos, a.Seq())
	id := "ask_" + strings.ReplaceAll(cursor, "/", "_")
	row := askRow{askPayload: p, Turn: turnKeyFor(A2AFeedName, cursor), At: a.At()}
	if err := state.SetJSON(a.B, kAsk+id, row); err != nil {
		return nil, err
	}
	w := servers.Wake{Seat: p.To, Subject: id, By: p.From, At: a.At()}
	if err := state.SetJSON(a.B, kA2A+cursor, w); err != nil {
		return nil, err
	}
	return askResult{ID: id, Turn: row.Turn}, nil
}

// A2AFeed is the runtime's own wake feed: questions seats put to each
// other with a2a_ask.
func A2AFeed(s *Store) Feed {
	read := func(after string, limit int) ([]servers.Wake, error) {
		if s == nil || s.node == nil {
			return nil, nil
		}
		return servers.Wakes(s.node, kA2A, after, limit)
	}
	return FeedOf(A2AFeedName, read, func(w servers.Wake) (Trigger, error) {
		var row askRow
		found := false
		err := s.view(func(r pebble.Reader) error {
			var err error
			found, err = state.GetJSON(r, kAsk+w.Subject, &row)
			return err
		})
		if err != nil || !found {
			return Trigger{}, fmt.Errorf("the question %s is not in this node's store (%v)", w.Subject, err)
		}
		return Trigger{Text: row.Question, Author: servers.Author{Seat: row.From, Kind: authority.KindAgent},
			About: fmt.Sprintf("a question from @%s (a2a_ask); your answer, the text you end the turn with, goes back to them", row.From)}, nil
	})
}

type askIn struct {
	To       string `json:"to" jsonschema:"the AI colleague's handle"`
	Question string `json:"question" jsonschema:"one question, complete in itself: the colleague sees nothing of your turn but this"`
	servers.OpIDArg
}

type askOut struct {
	To      string `json:"to"`
	Outcome string `json:"outcome"`
	// Answer is the colleague's answer, fenced as its words.
	Answer string `json:"answer,omitempty"`
	Note   string `json:"note,omitempty"`
}

func (b *builtins) a2aAsk(ctx context.Context, c authority.Caller, in askIn) (askOut, error) {
	if err := seatOnly(c, "a2a_ask"); err != nil {
		return askOut{}, err
	}
	to := strings.TrimPrefix(strings.TrimSpace(in.To), "@")
	dir := b.dir()
	s, ok := dir.Seat(to)
	switch {
	case !ok:
		return askOut{}, authority.Refuse(authority.Invalid, "to %q names no seat; lookup_colleague finds a colleague's handle.", in.To)
	case s.Kind != authority.SeatAgent:
		return askOut{}, authority.Refuse(authority.Invalid, "to %q is a person; a2a_ask asks AI colleagues. Ask a person where they work (a comment that mentions them).", in.To)
	case strings.EqualFold(s.Handle, c.Seat):
		return askOut{}, authority.Refuse(authority.Invalid, "to names you; a2a_ask asks a colleague.")
	case strings.TrimSpace(in.Question) == "":
		return askOut{}, authority.Refuse(authority.Invalid, "question is empty.")
	}
	call, err := b.writes.Begin(c, "a2a_ask", &in, false)
	if err != nil {
		return askOut{}, err
	}
	_, res, err := servers.Write[askResult](ctx, b.writes, call, func(pebble.Reader) (servers.Intent, error) {
		return servers.Intent{Kind: kindAsk, Payload: askPayload{From: c.Seat, To: s.Handle, Question: in.Question, AskerTurn: c.TurnKey},
			What: fmt.Sprintf("your question to @%s", s.Handle)}, nil
	})
	if err != nil {
		return askOut{}, err
	}
	if res == nil {
		return askOut{}, authority.Refuse(authority.Unavailable, "Your question to @%s is on the log but not yet on this node; make the same call again shortly, and it waits for the answer.", s.Handle)
	}
	wctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	rec, err := b.store.waitEnded(wctx, res.Turn)
	if err != nil {
		return askOut{}, authority.Refuse(authority.Unavailable,
			"@%s has not answered yet (its turn %s is still to run or running); make the same call again later to wait for the same answer, without asking twice.", s.Handle, res.Turn)
	}
	out := askOut{To: s.Handle, Outcome: rec.Outcome, Answer: servers.Fence(rec.Account, []servers.Author{{Seat: s.Handle, Kind: authority.KindAgent}})}
	if rec.Outcome != Delivered {
		out.Note = rec.Reason
	}
	return out, nil
}

// waitEnded waits until a turn has ended, or ctx ends.
func (s *Store) waitEnded(ctx context.Context, key string) (TurnRecord, error) {
	for {
		pos := s.node.Position()
		rec, found, err := s.Turn(key)
		if err != nil {
			return TurnRecord{}, err
		}
		if found && !rec.Running() {
			return rec, nil
		}
		if err := s.node.WaitFor(ctx, pos+1); err != nil {
			return TurnRecord{}, err
		}
	}
}
