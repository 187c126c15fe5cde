package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// A seat's memory is its own: a private diary of facts it chose to keep
// (reflect_and_persist), read back by what matters now (refresh_memory),
// its past turns (query_episodes), and the mark that it has read its
// onboarding (mark_onboarded). Team-shared knowledge belongs in the
// knowledge base instead. Everything is read back whole: the stored row is
// the only copy, and a model is never shown a silent cut of its own
// memory.

type diaryEntry struct {
	Kind string    `json:"kind"`
	Note string    `json:"note"`
	At   time.Time `json:"at"`
	Turn string    `json:"turn,omitempty"`
}

type diaryPayload struct {
	Seat string `json:"seat"`
	Kind string `json:"kind"`
	Note string `json:"note"`
}

func applyDiary(a *servers.Apply) (any, error) {
	var p diaryPayload
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	e := diaryEntry{Kind: p.Kind, Note: p.Note, At: a.At(), Turn: a.Op.Caller.TurnKey}
	return nil, state.SetJSON(a.B, fmt.Sprintf("%s%s/%016x.%04d", kDiary, p.Seat, a.Pos, a.Seq()), e)
}

type onboardPayload struct {
	Seat string `json:"seat"`
	Note string `json:"note,omitempty"`
}

type onboardMark struct {
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
	Turn string    `json:"turn,omitempty"`
}

func applyOnboarded(a *servers.Apply) (any, error) {
	var p onboardPayload
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	return nil, state.SetJSON(a.B, kOnb+p.Seat, onboardMark{At: a.At(), Note: p.Note, Turn: a.Op.Caller.TurnKey})
}

// Onboarded reports whether a seat has stamped its onboarding mark.
func (s *Store) Onboarded(seat string) bool {
	found := false
	_ = s.view(func(r pebble.Reader) error {
		var m onboardMark
		var err error
		found, err = state.GetJSON(r, kOnb+seat, &m)
		return err
	})
	return found
}

// ---- reflect_and_persist ----

type reflectIn struct {
	Note string `json:"note" jsonschema:"the fact to keep, in a sentence or a short paragraph"`
	Kind string `json:"kind,omitempty" jsonschema:"long for what stays true, short for what matters for the next days; long by default"`
	servers.OpIDArg
}

type reflectOut struct {
	servers.WriteOut
	Kind string `json:"kind"`
}

func (b *builtins) reflectAndPersist(ctx context.Context, c authority.Caller, in reflectIn) (reflectOut, error) {
	if err := seatOnly(c, "reflect_and_persist"); err != nil {
		return reflectOut{}, err
	}
	kind := strings.TrimSpace(in.Kind)
	if kind == "" {
		kind = "long"
	}
	call, err := b.writes.Begin(c, "reflect_and_persist", &in, false)
	if err != nil {
		return reflectOut{}, err
	}
	wo, _, err := servers.Write[struct{}](ctx, b.writes, call, func(pebble.Reader) (servers.Intent, error) {
		switch {
		case kind != "long" && kind != "short":
			return servers.Intent{}, authority.Refuse(authority.Invalid, "kind %q is not long or short.", in.Kind)
		case strings.TrimSpace(in.Note) == "":
			return servers.Intent{}, authority.Refuse(authority.Invalid, "note is empty; write the fact to keep.")
		case len(in.Note) > maxNote:
			return servers.Intent{}, authority.Refuse(authority.Invalid, "note is %d bytes; a diary note holds at most %d. Keep one fact per note and call again.", len(in.Note), maxNote)
		}
		return servers.Intent{Kind: kindDiary, Payload: diaryPayload{Seat: c.Seat, Kind: kind, Note: servers.Unfence(in.Note)}, What: "the diary note"}, nil
	})
	if err != nil {
		return reflectOut{}, err
	}
	return reflectOut{WriteOut: wo, Kind: kind}, nil
}

// ---- refresh_memory ----

type refreshIn struct {
	Query string `json:"query,omitempty" jsonschema:"what the turn now turns out to be about, in a few words; empty recalls every long note"`
}

type memoryNote struct {
	Kind string    `json:"kind"`
	Note string    `json:"note"`
	At   time.Time `json:"at"`
}

type refreshOut struct {
	Notes []memoryNote `json:"notes"`
	// Left are the notes that share no word with the query.
	Left int    `json:"left_out,omitempty"`
	How  string `json:"how"`
}

// shortLived is how long a short note is recalled.
const shortLived = 7 * 24 * time.Hour

func (b *builtins) refreshMemory(_ context.Context, c authority.Caller, in refreshIn) (refreshOut, error) {
	if err := seatOnly(c, "refresh_memory"); err != nil {
		return refreshOut{}, err
	}
	if len(in.Query) > maxQuery {
		return refreshOut{}, authority.Refuse(authority.Invalid, "query is %d bytes; it holds at most %d. Shorten it and call again.", len(in.Query), maxQuery)
	}
	var all []diaryEntry
	err := b.store.view(func(r pebble.Reader) error {
		return scan(r, kDiary+c.Seat+"/", func(_ string, v []byte) error {
			var e diaryEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			all = append(all, e)
			return nil
		})
	})
	if err != nil {
		return refreshOut{}, err
	}
	words := wordsOf(in.Query)
	type scored struct {
		e     diaryEntry
		score int
	}
	var keep []scored
	out := refreshOut{How: "every long note, and the short ones of the last seven days, newest first"}
	if len(words) > 0 {
		out.How = "the notes sharing words with the query, most shared first; a note sharing none is left out and counted"
	}
	for _, e := range all {
		if e.Kind == "short" && time.Since(e.At) > shortLived {
			continue
		}
		s := overlap(words, e.Note)
		if len(words) > 0 && s == 0 {
			out.Left++
			continue
		}
		keep = append(keep, scored{e, s})
	}
	sort.SliceStable(keep, func(i, j int) bool {
		if keep[i].score != keep[j].score {
			return keep[i].score > keep[j].score
		}
		return keep[i].e.At.After(keep[j].e.At)
	})
	out.Notes = []memoryNote{}
	for _, k := range keep {
		out.Notes = append(out.Notes, memoryNote{Kind: k.e.Kind, Note: k.e.Note, At: k.e.At})
	}
	return out, nil
}

// ---- query_episodes ----

type episodesIn struct {
	Query        string `json:"query,omitempty" jsonschema:"recall turns about this, by meaning (by words where the hub has no embeddings model, which the answer says); at most 400 bytes"`
	Conversation string `json:"conversation,omitempty" jsonschema:"recall the turns about one thing: a work item's key, a page's id"`
	Limit        int    `json:"limit,omitempty" jsonschema:"at most this many, newest first when no query is given (default 10, at most 50)"`
}

type episode struct {
	Turn      string    `json:"turn"`
	Woken     time.Time `json:"woken"`
	About     string    `json:"about"`
	Subject   string    `json:"subject"`
	Requester string    `json:"requester,omitempty"`
	// Ask is what woke the turn, fenced as its writer's; Account is what
	// the turn answered last. Either past recallBytes is condensed, and
	// AskCondensed or AccountCondensed then says by which model and from
	// how long a text.
	Ask              string   `json:"ask,omitempty"`
	AskCondensed     string   `json:"ask_condensed,omitempty"`
	Account          string   `json:"account,omitempty"`
	AccountCondensed string   `json:"account_condensed,omitempty"`
	Outcome          string   `json:"outcome"`
	Tools            []string `json:"tools,omitempty"`
}

// compactedMonth is a closed month of the seat's turns as its compacted
// record has it: a summary by the seat's auxiliary model, labelled with
// how it was made; query_episodes recalls each of its turns whole.
type compactedMonth struct {
	Month       string   `json:"month"`
	Turns       []string `json:"turns"`
	Summary     string   `json:"summary"`
	CompactedBy string   `json:"compacted_by"`
}

type episodesOut struct {
	Episodes []episode `json:"episodes"`
	// Months are the seat's compacted months a query found, closest
	// first (never with a conversation).
	Months []compactedMonth `json:"months,omitempty"`
	How    string           `json:"how"`
	// Mode is the ranking a query was served by: hybrid (meaning and
	// words) or keyword; Degraded says why it is not by meaning, and Note
	// how complete the index was, as every search of the hub says them.
	Mode     string `json:"mode,omitempty"`
	Degraded string `json:"degraded,omitempty"`
	Note     string `json:"note,omitempty"`
}

func (b *builtins) queryEpisodes(ctx context.Context, c authority.Caller, in episodesIn) (episodesOut, error) {
	if err := seatOnly(c, "query_episodes"); err != nil {
		return episodesOut{}, err
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = 10
	case limit < 0 || limit > 50:
		return episodesOut{}, authority.Refuse(authority.Invalid, "limit %d is out of range (1 to 50).", in.Limit)
	}
	conversation := strings.TrimSpace(in.Conversation)
	about := func(rec TurnRecord) bool { return conversation == "" || strings.EqualFold(rec.Subject, conversation) }
	out := episodesOut{Episodes: []episode{}, How: "your most recent turns first"}
	var picked []TurnRecord
	if strings.TrimSpace(in.Query) == "" {
		recs, err := b.store.Episodes(c.Seat, 0)
		if err != nil {
			return episodesOut{}, err
		}
		for _, rec := range recs {
			if about(rec) && len(picked) < limit {
				picked = append(picked, rec)
			}
		}
		if conversation != "" {
			out.How = "the turns about " + conversation + ", most recent first"
		}
	} else {
		if b.episodes == nil {
			return episodesOut{}, authority.Refuse(authority.Unavailable, "The search of your past turns is not open on this hub node, so nothing was searched. Recall them by conversation or most recent first (no query) instead.")
		}
		// A conversation narrows what the search ranked, so it asks for
		// the most the search answers.
		want := limit
		if conversation != "" {
			want = search.MaxLimit
		}
		res, err := b.episodes.Search(ctx, search.Query{Text: in.Query, Scope: c.Seat, Limit: want})
		if err != nil {
			return episodesOut{}, err
		}
		out.Mode, out.Degraded, out.Note = res.Mode, res.Degraded, res.Note
		out.How = "your turns closest to the query in meaning and words, closest first"
		if res.Mode == search.ModeKeyword {
			out.How = "your turns matching the query's words, best match first"
		}
		for _, h := range res.Hits {
			if rest, ok := strings.CutPrefix(h.ID, monthDocID); ok {
				// A compacted month is about many things, so a recall of
				// one conversation leaves it out.
				seat, month, _ := strings.Cut(rest, "/")
				if seat != c.Seat || conversation != "" || len(out.Months) >= limit {
					continue
				}
				m, found, err := b.store.month(seat, month)
				if err != nil {
					return episodesOut{}, err
				}
				if found {
					out.Months = append(out.Months, compactedMonth{Month: m.Month, Turns: m.Turns, Summary: m.Summary, CompactedBy: m.compactedBy()})
				}
				continue
			}
			rec, found, err := b.store.Turn(h.ID)
			if err != nil {
				return episodesOut{}, err
			}
			if found && rec.Seat == c.Seat && !rec.Running() && about(rec) && len(picked) < limit {
				picked = append(picked, rec)
			}
		}
	}
	// Every rewrite of one answer shares one deadline: past it, what is
	// left is carried whole rather than waited for.
	cctx, cancel := context.WithTimeout(ctx, recallDeadline)
	defer cancel()
	for _, rec := range picked {
		ask, askNote := b.condensed(cctx, c, rec.Trigger)
		account, accountNote := b.condensed(cctx, c, rec.Account)
		out.Episodes = append(out.Episodes, episode{Turn: rec.Key, Woken: rec.Woken, About: rec.About, Subject: rec.Subject,
			Requester: rec.Requester, Ask: servers.Fence(ask, []servers.Author{rec.TriggerBy}), AskCondensed: askNote,
			Account: account, AccountCondensed: accountNote, Outcome: rec.Outcome, Tools: rec.Tools})
	}
	return out, nil
}

// A recalled turn's ask and account are shown whole up to recallBytes
// each; a longer one is condensed by the seat's auxiliary model (OUT-2),
// so a recall of a few turns stays a recall and not a re-reading of them,
// and what is shown is still what the text said rather than its opening.
// Where no model condenses it (none named, the call failed or was refused
// on the budget, the answer's deadline passed) it is carried whole. The
// prefetch's similar prior work is this same answer.
const (
	recallBytes    = 600
	recallDeadline = 30 * time.Second
)

// condensed is text as a recall shows it, and a label saying how it was
// condensed ("" when it is whole).
func (b *builtins) condensed(ctx context.Context, c authority.Caller, text string) (string, string) {
	if len(text) <= recallBytes || b.condense == nil || ctx.Err() != nil {
		return text, ""
	}
	short, model, err := b.condense(ctx, c, text, recallBytes)
	if err != nil {
		return text, ""
	}
	return short, fmt.Sprintf("condensed by %s from %d bytes", model, len(text))
}

// ---- mark_onboarded ----

type onboardIn struct {
	Note string `json:"note,omitempty" jsonschema:"what you read and took from it, in a sentence or two"`
	servers.OpIDArg
}

type onboardOut struct {
	servers.WriteOut
}

func (b *builtins) markOnboarded(ctx context.Context, c authority.Caller, in onboardIn) (onboardOut, error) {
	if err := seatOnly(c, "mark_onboarded"); err != nil {
		return onboardOut{}, err
	}
	call, err := b.writes.Begin(c, "mark_onboarded", &in, false)
	if err != nil {
		return onboardOut{}, err
	}
	wo, _, err := servers.Write[struct{}](ctx, b.writes, call, func(pebble.Reader) (servers.Intent, error) {
		if len(in.Note) > maxNote {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "note is %d bytes; it holds at most %d. Shorten it and call again.", len(in.Note), maxNote)
		}
		return servers.Intent{Kind: kindOnboarded, Payload: onboardPayload{Seat: c.Seat, Note: in.Note}, What: "your onboarding mark"}, nil
	})
	return onboardOut{WriteOut: wo}, err
}

// wordsOf is a text's distinct lower-case words of three letters or more
// that say what it is about: a note sharing only "the" or "with" with a
// query has nothing to do with it, and recalling it would make the filter
// no filter.
func wordsOf(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	}) {
		if len(w) >= 3 && !functionWords[w] {
			out[w] = true
		}
	}
	return out
}

// functionWords are the English words that carry grammar, not a subject.
var functionWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and for are was were this that these those with from have has had not but you your yours
		our ours its into onto what why how who whom whose when where which did does doing done any all can could will would shall
		should about there their theirs them they then than been being also just only some more most over such very each other
		out off own too may might must one ones her hers his him she let get got yet nor per via upon`) {
		m[w] = true
	}
	return m
}()

// overlap counts the query's words found in text.
func overlap(words map[string]bool, text string) int {
	if len(words) == 0 {
		return 0
	}
	n := 0
	for w := range wordsOf(text) {
		if words[w] {
			n++
		}
	}
	return n
}
