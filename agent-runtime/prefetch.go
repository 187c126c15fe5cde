package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// The turn-start prefetch: before its first model round a turn recalls
// what the seat already knows that bears on what woke it — the notes of
// its private diary (the personal-memory filter, which refresh_memory
// re-runs mid-turn by a better query), its past turns most like this one
// (query_episodes), and its own skills — and hands them to the model
// beneath what woke it, each whole (OUT-1): a block cut to a budget would
// be a silent decision about which of its own memories a seat may see. A
// recalled turn's long ask or account alone is condensed, and labelled so,
// as query_episodes answers it (OUT-2).
// Notes and turns are recalled through the seat's own builtins, as the
// seat, so the prefetch and the tools cannot disagree on what a filter
// keeps, and a node without them (no store) prefetches nothing.

// similarTurns is how many past turns the prefetch recalls.
const similarTurns = 3

// prefetch is the blocks of what the seat recalls at the turn's start,
// or "" when it recalls nothing.
func (t *turn) prefetch(ctx context.Context) string {
	ask := strings.TrimSpace(t.rec.Trigger)
	if ask == "" {
		ask = t.rec.About
	}
	var blocks []string
	for _, b := range []string{t.memoryBlock(ctx, ask), t.priorWorkBlock(ctx, ask), t.skillsBlock(ask)} {
		if b != "" {
			blocks = append(blocks, b)
		}
	}
	return strings.Join(blocks, "\n\n")
}

// recall calls one of the seat's builtins as the seat, inside the turn,
// and reads its answer into out; false when the surface has no such tool
// or the call was refused (said on the node's log).
func (t *turn) recall(ctx context.Context, tool string, args map[string]any, out any) bool {
	if _, ok := t.all[tool]; !ok {
		return false
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return false
	}
	res := t.surface.Call(ctx, t.caller, tool, raw)
	text := resultText(res)
	if res.IsError {
		t.log.Warn("prefetch_unread", "tool", tool, "reason", text)
		return false
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		t.log.Warn("prefetch_unread", "tool", tool, "error", err.Error())
		return false
	}
	return true
}

// recallQuery is the ask as a recall's query: the whole ask where it fits
// a query's bound, else nothing, and the recall is not by the ask at all
// rather than by its opening, which a filter would read as the whole.
func recallQuery(ask string) (string, bool) {
	if len(ask) > maxQuery {
		return "", false
	}
	return ask, true
}

// memoryBlock is the diary notes the personal-memory filter keeps for the
// ask: those sharing words with it, or every long note and the recent
// short ones where the ask is too long to filter by.
func (t *turn) memoryBlock(ctx context.Context, ask string) string {
	args := map[string]any{}
	if q, ok := recallQuery(ask); ok {
		args["query"] = q
	}
	var out refreshOut
	if !t.recall(ctx, "refresh_memory", args, &out) || len(out.Notes)+out.Left == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Personal memory\nFrom your private diary: %s. refresh_memory recalls again by what the turn turns out to be about.\n", out.How)
	for _, n := range out.Notes {
		fmt.Fprintf(&b, "- (%s, %s) %s\n", n.Kind, n.At.UTC().Format("2 January 2006"), n.Note)
	}
	if out.Left > 0 {
		fmt.Fprintf(&b, "%d more notes share nothing with what woke you and are not shown.\n", out.Left)
	}
	return strings.TrimRight(b.String(), "\n")
}

// priorWorkBlock is the seat's past turns most like this one: by the ask,
// else (an ask too long to query by, or none like it) its turns about the
// same subject.
func (t *turn) priorWorkBlock(ctx context.Context, ask string) string {
	var out episodesOut
	q, ok := recallQuery(ask)
	if !ok || !t.recall(ctx, "query_episodes", map[string]any{"query": q, "limit": similarTurns}, &out) || len(out.Episodes) == 0 {
		if t.rec.Subject == "" || !t.recall(ctx, "query_episodes", map[string]any{"conversation": t.rec.Subject, "limit": similarTurns}, &out) {
			return ""
		}
	}
	if len(out.Episodes) == 0 {
		return ""
	}
	if s, ok := t.summarizePriorWork(ctx, out.How, out.Episodes); ok {
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Similar prior work\nYour past turns most like this one (%s); query_episodes recalls more.\n", out.How)
	// A long ask or account arrives condensed, and is labelled so here.
	label := func(condensed string) string {
		if condensed == "" {
			return ""
		}
		return " (" + condensed + ")"
	}
	for _, e := range out.Episodes {
		fmt.Fprintf(&b, "- %s, %s, ended %s. What woke you%s:\n%s\n", e.Woken.UTC().Format("2 January 2006"), e.About, e.Outcome, label(e.AskCondensed), e.Ask)
		if e.Account != "" {
			fmt.Fprintf(&b, "  What you answered%s: %s\n", label(e.AccountCondensed), e.Account)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// skillsBlock is the seat's own skills: those sharing words with the ask
// whole, as use_skill reads them, and the others by name.
func (t *turn) skillsBlock(ask string) string {
	skills, err := t.r.opts.Store.skills(t.rec.Seat)
	if err != nil {
		t.log.Warn("prefetch_unread", "what", "skills", "error", err.Error())
		return ""
	}
	if len(skills) == 0 {
		return ""
	}
	words := wordsOf(ask)
	var b strings.Builder
	var others []string
	b.WriteString("## Your skills\nProcedures you keep for yourself; use_skill reads one, refine_skill corrects it.\n")
	for _, s := range skills {
		v := s.Versions[len(s.Versions)-1]
		if overlap(words, s.Name+" "+v.Body) == 0 {
			others = append(others, s.Name)
			continue
		}
		fmt.Fprintf(&b, "### %s (version %d)\n%s\n", s.Name, v.Version, v.Body)
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "Your other skills, which share no words with what woke you: %s.\n", strings.Join(others, ", "))
	}
	return strings.TrimRight(b.String(), "\n")
}

// skills lists a seat's own skills with every version each had, by name.
func (s *Store) skills(seat string) ([]skill, error) {
	var out []skill
	err := s.view(func(r pebble.Reader) error {
		return scan(r, kSkill+seat+"/", func(_ string, v []byte) error {
			var sk skill
			if err := json.Unmarshal(v, &sk); err != nil {
				return err
			}
			if len(sk.Versions) > 0 {
				out = append(out, sk)
			}
			return nil
		})
	})
	return out, err
}
