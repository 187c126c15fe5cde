package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// What the runtime keeps is on the node's log like every other write, and
// projected into the node's store under "ag/": each turn from its start to
// its end, each seat's place in every wake feed, the tokens turns spent,
// the seats' diaries, skills and onboarding marks, and the questions seats
// put to each other. A hub killed mid-turn finds the turn still running in
// the projection and runs it again, with the same turn key.

const (
	kTurn   = "ag/turn/"   // + turn key -> TurnRecord
	kRun    = "ag/run/"    // + seat/turn key -> "" while the turn runs
	kCursor = "ag/cur/"    // + seat/feed -> the seat's last started wake
	kOrigin = "ag/origin/" // + feed -> where the runtime started reading it
	kEp     = "ag/ep/"     // + seat/pos(16 hex) -> turn key, ended turns in order
	kUse    = "ag/use/"    // + at(16 hex ms)/turn key -> spend
	kDiary  = "ag/diary/"  // + seat/pos(16 hex).seq -> diary entry
	kSkill  = "ag/skill/"  // + seat/name -> skill
	kOnb    = "ag/onb/"    // + seat -> onboarding mark
	kAsk    = "ag/ask/"    // + ask id -> question one seat put to another
	kA2A    = "ag/wake/"   // + pos(16 hex)/n(4) -> wake of the asked seat
	kPause  = "ag/pause/"  // + seat -> who paused it, while it is paused
)

// Operation kinds, one projector each.
const (
	kindOrigin    = "agent.origin"
	kindStarted   = "agent.turn.started"
	kindEnded     = "agent.turn.ended"
	kindDiary     = "agent.diary"
	kindSkill     = "agent.skill"
	kindOnboarded = "agent.onboarded"
	kindAsk       = "agent.ask"
	kindPaused    = "agent.seat.paused"
	kindSpent     = "agent.spent"
)

// Projectors returns the runtime's projectors; the node registers them
// beside the first-party servers' when it opens.
func Projectors() []state.Projector {
	return append([]state.Projector{
		servers.Projector(kindOrigin, applyOrigin),
		servers.Projector(kindStarted, applyStarted),
		servers.Projector(kindEnded, applyEnded),
		servers.Projector(kindDiary, applyDiary),
		servers.Projector(kindSkill, applySkill),
		servers.Projector(kindOnboarded, applyOnboarded),
		servers.Projector(kindAsk, applyAsk),
		servers.Projector(kindPaused, applyPaused),
		servers.Projector(kindSpent, applySpent),
		servers.Projector(kindCompacted, applyCompacted),
	}, runProjectors()...)
}

// Outcomes a turn ends with.
const (
	// Delivered: the turn reached somebody (a call to a tool that delivers
	// or whose hints are unknown, or an answer its asker reads).
	Delivered = "delivered"
	// Undelivered: it ended having reached nobody, after one reminder.
	Undelivered = "undelivered"
	// BudgetExhausted: a ceiling had no room for its next model call.
	BudgetExhausted = "budget_exhausted"
	// Failed: the model could not be reached or answered nonsense.
	Failed = "failed"
	// NotRun: the seat has no model to run it on.
	NotRun = "not_run"
)

// TurnRecord is one turn as the log keeps it.
type TurnRecord struct {
	Key     string `json:"key"`
	Seat    string `json:"seat"`
	Feed    string `json:"feed"`
	Cursor  string `json:"cursor"`
	Subject string `json:"subject"`
	Comment int    `json:"comment,omitempty"`
	// Requester is whoever woke the turn; it acts for them.
	Requester string    `json:"requester"`
	Woken     time.Time `json:"woken"`
	// Trigger is the text that woke the seat, as its writer wrote it; it
	// is shown to the model fenced as theirs.
	Trigger   string         `json:"trigger,omitempty"`
	TriggerBy servers.Author `json:"trigger_by"`
	// About says in a phrase what woke the seat ("a comment on CORE-1").
	About string `json:"about"`

	Outcome   string    `json:"outcome,omitempty"`
	Delivered bool      `json:"delivered,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Account   string    `json:"account,omitempty"`
	Rounds    int       `json:"rounds,omitempty"`
	Usage     Usage     `json:"usage"`
	Tools     []string  `json:"tools,omitempty"`
	Ended     time.Time `json:"ended,omitzero"`
}

// Running reports whether the turn has started and not ended.
func (t TurnRecord) Running() bool { return t.Outcome == "" }

// turnKeyFor is the key of the turn a wake row starts: the same on every
// node and every re-run, since it is the row's place in its feed.
func turnKeyFor(feed, cursor string) string {
	return feed + "-" + strings.ReplaceAll(cursor, "/", "-")
}

// endPayload is what a turn's end records.
type endPayload struct {
	Key       string   `json:"key"`
	Outcome   string   `json:"outcome"`
	Delivered bool     `json:"delivered,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Account   string   `json:"account,omitempty"`
	Rounds    int      `json:"rounds,omitempty"`
	Usage     Usage    `json:"usage"`
	Tools     []string `json:"tools,omitempty"`
}

// spend is one ended turn's tokens, for the budget's windows.
type spend struct {
	Seat   string `json:"seat"`
	Tokens int64  `json:"tokens"`
}

// spentPayload is tokens a model call outside any turn spent (an
// answer_knowledge), under an id of its own.
type spentPayload struct {
	ID string `json:"id"`
	spend
}

func applySpent(a *servers.Apply) (any, error) {
	var p spentPayload
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	return nil, state.SetJSON(a.B, fmt.Sprintf("%s%016x/%s", kUse, a.At().UnixMilli(), p.ID), p.spend)
}

// spent records tokens a call outside any turn spent, for the budget's
// windows after a restart.
func (s *Store) spent(ctx context.Context, c authority.Caller, seat string, tokens int64) error {
	now := time.Now()
	id := fmt.Sprintf("spent-%s-%d", seat, now.UnixNano())
	_, err := s.write(ctx, c, id, now, kindSpent, id, spentPayload{ID: id, spend: spend{Seat: seat, Tokens: tokens}})
	return err
}

func applyOrigin(a *servers.Apply) (any, error) {
	var feeds map[string]string
	if err := a.Payload(&feeds); err != nil {
		return nil, err
	}
	for feed, cursor := range feeds {
		var prior string
		found, err := state.GetJSON(a.R, kOrigin+feed, &prior)
		if err != nil {
			return nil, err
		}
		if !found {
			if err := state.SetJSON(a.B, kOrigin+feed, cursor); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

func applyStarted(a *servers.Apply) (any, error) {
	var rec TurnRecord
	if err := a.Payload(&rec); err != nil {
		return nil, err
	}
	var prior TurnRecord
	found, err := state.GetJSON(a.R, kTurn+rec.Key, &prior)
	if err != nil || found {
		// A start recorded twice (a re-run's) changes nothing.
		return nil, err
	}
	if err := state.SetJSON(a.B, kTurn+rec.Key, rec); err != nil {
		return nil, err
	}
	if err := a.B.Set([]byte(kRun+rec.Seat+"/"+rec.Key), nil, nil); err != nil {
		return nil, err
	}
	return nil, state.SetJSON(a.B, kCursor+rec.Seat+"/"+rec.Feed, rec.Cursor)
}

func applyEnded(a *servers.Apply) (any, error) {
	var end endPayload
	if err := a.Payload(&end); err != nil {
		return nil, err
	}
	var rec TurnRecord
	found, err := state.GetJSON(a.R, kTurn+end.Key, &rec)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, authority.Refuse(authority.NotFound, "No turn %s was started.", end.Key)
	}
	if !rec.Running() {
		return nil, nil
	}
	rec.Outcome, rec.Delivered, rec.Reason, rec.Account = end.Outcome, end.Delivered, end.Reason, end.Account
	rec.Rounds, rec.Usage, rec.Tools, rec.Ended = end.Rounds, end.Usage, end.Tools, a.At()
	if err := state.SetJSON(a.B, kTurn+rec.Key, rec); err != nil {
		return nil, err
	}
	if err := a.B.Delete([]byte(kRun+rec.Seat+"/"+rec.Key), nil); err != nil {
		return nil, err
	}
	if err := state.SetJSON(a.B, fmt.Sprintf("%s%s/%016x", kEp, rec.Seat, a.Pos), rec.Key); err != nil {
		return nil, err
	}
	// The turn is an episode now: query_episodes finds it by what it
	// says, once the episodes' index has read it.
	if err := search.Touch(a.B, a.Pos, EpisodeKind, rec.Key); err != nil {
		return nil, err
	}
	if rec.Usage.Total() > 0 {
		return nil, state.SetJSON(a.B, fmt.Sprintf("%s%016x/%s", kUse, a.At().UnixMilli(), rec.Key), spend{rec.Seat, rec.Usage.Total()})
	}
	return nil, nil
}

// Store reads and writes what the runtime keeps. It is safe for
// concurrent use; a nil node makes every call fail unavailable.
type Store struct {
	node *state.Node
}

// NewStore keeps the runtime's records on node.
func NewStore(node *state.Node) *Store { return &Store{node: node} }

// Node is the state node the store writes to.
func (s *Store) Node() *state.Node { return s.node }

func (s *Store) view(fn func(r pebble.Reader) error) error {
	if s == nil || s.node == nil {
		return authority.Refuse(authority.Unavailable, "This hub node keeps no state, so the agent runtime has nothing to read.")
	}
	return s.node.View(fn)
}

// write makes one runtime operation, once: its id is derived from scope
// and what it says, so writing it again (a re-run) lands nowhere new.
func (s *Store) write(ctx context.Context, caller authority.Caller, scope string, minted time.Time, kind string, id, payload any) (state.Answer, error) {
	if s == nil || s.node == nil {
		return state.Answer{}, authority.Refuse(authority.Unavailable, "This hub node keeps no state, so the agent runtime cannot record anything.")
	}
	args, err := json.Marshal(id)
	if err != nil {
		return state.Answer{}, err
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return state.Answer{}, err
	}
	return s.node.Write(ctx, state.Op{ID: state.DeriveOpID(scope, minted, kind, args), Tool: kind, Args: args, Kind: kind,
		Payload: body, Caller: caller})
}

// Turn reads one turn's record.
func (s *Store) Turn(key string) (TurnRecord, bool, error) {
	var rec TurnRecord
	var found bool
	err := s.view(func(r pebble.Reader) error {
		var err error
		found, err = state.GetJSON(r, kTurn+key, &rec)
		return err
	})
	return rec, found, err
}

// Running lists a seat's turns that started and never ended, oldest
// first.
func (s *Store) Running(seat string) ([]TurnRecord, error) {
	var out []TurnRecord
	err := s.view(func(r pebble.Reader) error {
		return scan(r, kRun+seat+"/", func(k string, _ []byte) error {
			var rec TurnRecord
			found, err := state.GetJSON(r, kTurn+strings.TrimPrefix(k, kRun+seat+"/"), &rec)
			if err == nil && found && rec.Running() {
				out = append(out, rec)
			}
			return err
		})
	})
	// Keys sort by feed and place, not by time: order by when each woke.
	sortByWoken(out)
	return out, err
}

// Cursors are a seat's place in each feed: its last started wake, else
// where the runtime first started reading the feed.
func (s *Store) Cursors(seat string, feeds []string) (map[string]string, error) {
	out := map[string]string{}
	err := s.view(func(r pebble.Reader) error {
		for _, f := range feeds {
			var c string
			found, err := state.GetJSON(r, kCursor+seat+"/"+f, &c)
			if err != nil {
				return err
			}
			if !found {
				if _, err := state.GetJSON(r, kOrigin+f, &c); err != nil {
					return err
				}
			}
			out[f] = c
		}
		return nil
	})
	return out, err
}

// Origins are the places the runtime first started reading each feed.
func (s *Store) Origins() (map[string]string, error) {
	out := map[string]string{}
	err := s.view(func(r pebble.Reader) error {
		return scan(r, kOrigin, func(k string, v []byte) error {
			var c string
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			out[strings.TrimPrefix(k, kOrigin)] = c
			return nil
		})
	})
	return out, err
}

// Spending calls fn with each ended turn's tokens since from.
func (s *Store) Spending(from time.Time, fn func(seat string, at time.Time, tokens int64)) error {
	return s.view(func(r pebble.Reader) error {
		return scanFrom(r, kUse, fmt.Sprintf("%s%016x", kUse, from.UnixMilli()), func(k string, v []byte) error {
			var sp spend
			if err := json.Unmarshal(v, &sp); err != nil {
				return err
			}
			var ms int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(k, kUse)[:16], "%016x", &ms); err != nil {
				return err
			}
			fn(sp.Seat, time.UnixMilli(ms), sp.Tokens)
			return nil
		})
	})
}

// Episodes lists a seat's ended turns, newest first, at most limit.
func (s *Store) Episodes(seat string, limit int) ([]TurnRecord, error) {
	var out []TurnRecord
	err := s.view(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kEp + seat + "/"), UpperBound: []byte(kEp + seat + "/\xff")})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.Last(); it.Valid() && (limit <= 0 || len(out) < limit); it.Prev() {
			var key string
			if err := json.Unmarshal(it.Value(), &key); err != nil {
				return err
			}
			var rec TurnRecord
			if found, err := state.GetJSON(r, kTurn+key, &rec); err != nil {
				return err
			} else if found {
				out = append(out, rec)
			}
		}
		return nil
	})
	return out, err
}

// scan calls fn with every key under prefix, in order.
func scan(r pebble.Reader, prefix string, fn func(key string, value []byte) error) error {
	return scanFrom(r, prefix, prefix, fn)
}

func scanFrom(r pebble.Reader, prefix, from string, fn func(key string, value []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(from), UpperBound: []byte(prefix + "\xff")})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()), it.Value()); err != nil {
			return err
		}
	}
	return nil
}
