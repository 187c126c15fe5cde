package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A person's decisions about the seats rather than their work (OPS-3):
// pause a seat, resume it, and steer a running turn with a note. They are
// operator-only tools, each for the lead of the seat's unit or an
// administrator. (mayDecide would also take the seat's holder, a person
// whose credential is bound to the AI seat; but a credential binds only
// to a person's seat, so no token reaches that branch and the tools do not
// offer it.)
//
// A pause is on the log, so it holds across restarts and on whichever
// node runs the seat next: a paused seat starts no new turn, and its
// wakes wait, in order, until it is resumed. A turn already running when
// the seat is paused runs to its end.
//
// A note steers the turn the seat is running now. It is read at the start
// of the turn's next model round, fenced as its writer's words; a turn
// that has no model round left to read it in cannot take one
// (steer_unsupported), and a seat running no turn has nothing to steer
// (not_running).

// SeatPause is a paused seat's mark: who paused it and when.
type SeatPause struct {
	Seat   string         `json:"seat"`
	Paused bool           `json:"paused"`
	By     servers.Author `json:"by"`
	At     time.Time      `json:"at,omitzero"`
}

func applyPaused(a *servers.Apply) (any, error) {
	var p SeatPause
	if err := a.Payload(&p); err != nil {
		return nil, err
	}
	if !p.Paused {
		return nil, a.B.Delete([]byte(kPause+p.Seat), nil)
	}
	var prior SeatPause
	found, err := state.GetJSON(a.R, kPause+p.Seat, &prior)
	if err != nil || found {
		// Paused already: the first pause's mark stands.
		return nil, err
	}
	p.At = a.At()
	return nil, state.SetJSON(a.B, kPause+p.Seat, p)
}

// Paused reads a seat's pause mark; ok false when it is not paused.
func (s *Store) Paused(seat string) (SeatPause, bool, error) {
	var p SeatPause
	var found bool
	err := s.view(func(r pebble.Reader) error {
		var err error
		found, err = state.GetJSON(r, kPause+strings.ToLower(seat), &p)
		return err
	})
	return p, found, err
}

// setPaused records a seat paused or resumed, as the caller.
func (s *Store) setPaused(ctx context.Context, c authority.Caller, seat string, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	now := time.Now()
	_, err := s.write(ctx, c, verb+"/"+seat+"/"+c.Seat, now, kindPaused,
		map[string]any{"seat": seat, "paused": paused, "at": now.UnixNano()},
		SeatPause{Seat: seat, Paused: paused, By: servers.AuthorOf(c)})
	return err
}

// Pause stops a seat from starting new turns until Resume; its wakes wait.
func (r *Runtime) Pause(ctx context.Context, c authority.Caller, seat string) error {
	if err := r.opts.Store.setPaused(ctx, c, strings.ToLower(seat), true); err != nil {
		return err
	}
	r.log.Info("seat_paused", "seat", seat, "by", c.Seat, "operator_id", c.OperatorID)
	return nil
}

// Resume lets a paused seat take its waiting wakes, in order.
func (r *Runtime) Resume(ctx context.Context, c authority.Caller, seat string) error {
	if err := r.opts.Store.setPaused(ctx, c, strings.ToLower(seat), false); err != nil {
		return err
	}
	r.log.Info("seat_resumed", "seat", seat, "by", c.Seat, "operator_id", c.OperatorID)
	return nil
}

// Holds reports whether this node runs the seat's turns now: the probe a
// decision about a seat's turn asks before it acts.
func (r *Runtime) Holds(seat string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.seats[strings.ToLower(seat)]
	return ok
}

// Steer hands a note to the turn a seat is running now and answers its
// key. It refuses not_running when the seat runs no turn here, and
// steer_unsupported when the turn has no model round left to read it in.
func (r *Runtime) Steer(c authority.Caller, seat, note string) (string, error) {
	r.mu.Lock()
	t := r.running[strings.ToLower(seat)]
	r.mu.Unlock()
	if t == nil {
		return "", authority.Refuse(authority.NotRunning, "@%s is running no turn now, so there is nothing to steer; mention or assign it to start one.", seat)
	}
	if !t.notes.take(note, servers.AuthorOf(c)) {
		return "", authority.Refuse(authority.SteerUnsupported,
			"@%s's turn %s is in its last model round, so it cannot read a note before it ends; wait for the turn to end and wake the seat again.", seat, t.rec.Key)
	}
	t.log.Info("turn_steered", "by", c.Seat, "operator_id", c.OperatorID)
	return t.rec.Key, nil
}

// notes are what people told a running turn, waiting for its next round.
type notes struct {
	mu sync.Mutex
	// open is false once the turn has no model round left to read a note
	// in (its last one under way, or it has ended).
	open    bool
	pending []string
}

// take queues a note; false when the turn can no longer read one.
func (n *notes) take(note string, by servers.Author) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.open {
		return false
	}
	n.pending = append(n.pending, servers.Fence(note, []servers.Author{by}))
	return true
}

// read answers the notes waiting, as one message (empty for none), and
// keeps the box open only if another round follows this one.
func (n *notes) read(more bool) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.open = more
	if len(n.pending) == 0 {
		return ""
	}
	msg := fmt.Sprintf("While you were working, you were sent %d note(s) about this turn; weigh them before you go on:\n%s",
		len(n.pending), strings.Join(n.pending, "\n"))
	n.pending = nil
	return msg
}

// unread reports whether notes wait to be read.
func (n *notes) unread() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending) > 0
}

// close ends the turn's box; its unread notes are answered for the log.
func (n *notes) close() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.open = false
	left := len(n.pending)
	n.pending = nil
	return left
}

// DecisionDeps is what the decisions are given: the directory in force,
// the runtime once it has started (nil before), and in a fleet the way to
// the node that holds a seat.
type DecisionDeps struct {
	Directory DirectorySource
	Runtime   func() *Runtime
	// Relay reaches the node of a fleet that holds a seat this node does
	// not run; nil for a node alone, which runs every seat held.
	Relay Relay
}

// A Relay asks the node holding a seat a question of a kind and answers
// its reply: ErrSeatNotHeld when no node holds the seat, ErrHolderSilent
// when its holder does not answer, ErrNotFleet for a node alone.
type Relay interface {
	AskSeatHolder(ctx context.Context, seat, kind string, question []byte) ([]byte, error)
}

// What a Relay answers besides a reply.
var (
	ErrSeatNotHeld  = errors.New("agent: no node holds the seat")
	ErrHolderSilent = errors.New("agent: the seat's holder did not answer")
	ErrNotFleet     = errors.New("agent: this node is not one of a fleet")
)

// SteerQuestion is the kind of question a steer_turn asks the seat's
// holder (Runtime.AnswerSteer answers it there).
const SteerQuestion = "steer"

// steerAsk is a steer_turn sent to the seat's holder: the caller was
// judged by the node asked; the holder hands the note on.
type steerAsk struct {
	Caller authority.Caller `json:"caller"`
	Seat   string           `json:"seat"`
	Note   string           `json:"note"`
}

// steerAnswer is the holder's answer: the turn's key, or its refusal.
type steerAnswer struct {
	Turn     string          `json:"turn,omitempty"`
	Class    authority.Class `json:"class,omitempty"`
	Sentence string          `json:"sentence,omitempty"`
}

// AnswerSteer answers a steer_turn another node sent for a seat this
// runtime may hold (the Relay's far end).
func (r *Runtime) AnswerSteer(question []byte) []byte {
	var q steerAsk
	var a steerAnswer
	if err := json.Unmarshal(question, &q); err != nil {
		a.Class, a.Sentence = authority.Invalid, "The steer sent to this node could not be read."
	} else if key, err := r.Steer(q.Caller, q.Seat, q.Note); err != nil {
		var ref *authority.Refusal
		if !errors.As(err, &ref) {
			ref = authority.Refuse(authority.Unavailable, "The node holding @%s could not take the note; try again.", q.Seat)
		}
		a.Class, a.Sentence = ref.Class, ref.Sentence
	} else {
		a.Turn = key
	}
	out, _ := json.Marshal(a)
	return out
}

// steerThrough sends a steer_turn to the node holding the seat: not
// running when no node holds it (nothing runs its turns), unavailable
// when its holder does not answer, else the holder's own answer.
func steerThrough(ctx context.Context, relay Relay, c authority.Caller, seat, note string) (string, error) {
	q, _ := json.Marshal(steerAsk{Caller: c, Seat: seat, Note: note})
	reply, err := relay.AskSeatHolder(ctx, seat, SteerQuestion, q)
	switch {
	case errors.Is(err, ErrNotFleet):
		return "", notHeldHere(seat)
	case errors.Is(err, ErrSeatNotHeld):
		return "", authority.Refuse(authority.NotRunning, "No node of the fleet holds @%s now, so it is running no turn to steer; mention or assign it to start one once it is placed.", seat)
	case err != nil:
		return "", authority.Refuse(authority.Unavailable,
			"The node holding @%s did not answer for its turns, so the note was not sent; try again in a moment.", seat)
	}
	var a steerAnswer
	if err := json.Unmarshal(reply, &a); err != nil {
		return "", authority.Refuse(authority.Unavailable, "The node holding @%s answered something unreadable, so the note may not have reached the turn; try again.", seat)
	}
	if a.Class != "" {
		return "", &authority.Refusal{Class: a.Class, Sentence: a.Sentence}
	}
	return a.Turn, nil
}

type seatIn struct {
	Seat string `json:"seat" jsonschema:"the AI seat's handle, with or without @"`
}

type pauseOut struct {
	Seat   string `json:"seat"`
	Paused bool   `json:"paused"`
}

type steerIn struct {
	Seat string `json:"seat" jsonschema:"the AI seat whose running turn to steer, with or without @"`
	Note string `json:"note" jsonschema:"what the turn should weigh before its next step, in a few sentences; read as your words"`
}

type steerOut struct {
	Seat string `json:"seat"`
	Turn string `json:"turn"`
	// Note says what became of it: queued, to be read at the turn's next
	// model round.
	Note string `json:"note"`
}

// maxNoteBytes bounds a note: it is sent on to a model whole, so a longer
// one is refused rather than cut.
const maxNoteBytes = 4000

// decisionHints: a decision changes what a seat does next, reaches no
// person, and repeating it changes nothing more.
var decisionHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}

// DecisionTools are the decisions about seats and turns, operator-only.
func DecisionTools(d DecisionDeps) []servers.Tool {
	runtime := func() (*Runtime, error) {
		if rt := d.Runtime(); rt != nil {
			return rt, nil
		}
		return nil, authority.Refuse(authority.Unavailable, "The agent runtime has not started on this node yet; try again in a moment.")
	}
	pause := func(paused bool) servers.Handler[seatIn, pauseOut] {
		verb := "resume"
		if paused {
			verb = "pause"
		}
		return func(ctx context.Context, c authority.Caller, in seatIn) (pauseOut, error) {
			s, err := mayDecide(c, d.Directory(), in.Seat, verb)
			if err != nil {
				return pauseOut{}, err
			}
			rt, err := runtime()
			if err != nil {
				return pauseOut{}, err
			}
			if paused {
				err = rt.Pause(ctx, c, s.Handle)
			} else {
				err = rt.Resume(ctx, c, s.Handle)
			}
			return pauseOut{Seat: s.Handle, Paused: paused}, err
		}
	}
	return []servers.Tool{
		servers.Typed("pause_seat",
			"Pause an AI seat: it starts no new turn, and what wakes it waits, in order, until it is resumed; a turn already running ends as it would. For the lead of the seat's unit or an administrator.",
			decisionHints, "", pause(true)).ForOperators(),
		servers.Typed("resume_seat",
			"Resume a paused AI seat: it takes the wakes that waited, in order. For the lead of the seat's unit or an administrator.",
			decisionHints, "", pause(false)).ForOperators(),
		servers.Typed("steer_turn",
			"Send a note to the turn an AI seat is running now; the turn reads it, as your words, before its next step. Refused not_running when the seat runs no turn, steer_unsupported when the turn has no step left to read it in. For the lead of the seat's unit or an administrator.",
			servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}, "",
			func(ctx context.Context, c authority.Caller, in steerIn) (steerOut, error) {
				note := strings.TrimSpace(in.Note)
				switch {
				case note == "":
					return steerOut{}, authority.Refuse(authority.Invalid, "note is empty; say what the turn should weigh.")
				case len(note) > maxNoteBytes:
					return steerOut{}, authority.Refuse(authority.Invalid, "note is %d bytes, past the limit of %d; shorten it and send it again.", len(note), maxNoteBytes)
				}
				s, err := mayDecide(c, d.Directory(), in.Seat, "steer")
				if err != nil {
					return steerOut{}, err
				}
				rt, err := runtime()
				if err != nil {
					return steerOut{}, err
				}
				// The probe: a seat this node runs is answered here; in a
				// fleet, one it does not is asked of the node holding it.
				var key string
				switch {
				case rt.Holds(s.Handle):
					key, err = rt.Steer(c, s.Handle, note)
				case d.Relay != nil:
					key, err = steerThrough(ctx, d.Relay, c, s.Handle, note)
				default:
					err = notHeldHere(s.Handle)
				}
				if err != nil {
					return steerOut{}, err
				}
				return steerOut{Seat: s.Handle, Turn: key, Note: "queued"}, nil
			}).ForOperators(),
		answerRunTool(d, runtime),
	}
}

// notHeldHere answers a steer on a node alone for a seat it does not run:
// nobody else could answer the probe.
func notHeldHere(seat string) error {
	return authority.Refuse(authority.Unavailable,
		"No node answers for @%s's turns now (the seat is not held anywhere), so the note was not sent; try again once it is.", seat)
}

// mayDecide is the decisions' authority: a person's (never an agent's),
// about an AI seat, for its holder (a credential bound to it), the lead
// of its unit or an administrator.
func mayDecide(c authority.Caller, dir *authority.Directory, handle, verb string) (authority.Seat, error) {
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	if handle == "" {
		return authority.Seat{}, authority.Refuse(authority.Invalid, "seat is empty; name the AI seat by its handle.")
	}
	if c.Kind == authority.KindAgent {
		return authority.Seat{}, authority.Refuse(authority.Forbidden, "Decisions about seats are a person's; an AI seat cannot %s one.", verb)
	}
	s, ok := dir.Seat(handle)
	if !ok || s.Kind != authority.SeatAgent {
		return authority.Seat{}, authority.Refuse(authority.NotFound, "The company has no AI seat @%s.", handle)
	}
	if authority.IsAdmin(c, dir) || c.Kind == authority.KindHuman && strings.EqualFold(c.Seat, s.Handle) {
		return s, nil
	}
	lead := ""
	if u, ok := dir.Unit(s.Unit); ok {
		lead = u.Lead
		if c.Kind == authority.KindHuman && lead != "" && strings.EqualFold(c.Seat, lead) {
			return s, nil
		}
	}
	who := "an administrator"
	if lead != "" {
		who = "the lead of its unit (@" + lead + ") or an administrator"
	}
	return authority.Seat{}, authority.Refuse(authority.Forbidden, "Only %s may %s @%s.", who, verb, s.Handle)
}

// NewDecisionServer serves the decisions as a first-party MCP server that
// believes caller metadata only under trust.
func NewDecisionServer(d DecisionDeps, trust servers.Trust, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-decisions", Version: servers.Version}, &mcp.ServerOptions{Logger: log})
	servers.Register(s, trust, log, DecisionTools(d)...)
	return s
}
