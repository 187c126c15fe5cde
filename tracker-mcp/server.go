package tracker

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// Deps is what the tracker needs from the node that serves it.
type Deps struct {
	// Node is the state node the tracker writes through and reads from; it
	// must have been opened with Projectors().
	Node *state.Node
	// Directory answers the company as of the revision in force. It is
	// called per call, so a reload is seen by the next call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
	// Now is the clock writes are stamped with; nil means time.Now.
	Now func() time.Time
}

// NewServer serves the tracker's tools as a first-party MCP server that
// believes caller metadata only under trust.
func NewServer(d Deps, trust servers.Trust) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-tracker", Version: "0.1.0"}, &mcp.ServerOptions{Logger: d.Logger})
	servers.Register(s, trust, d.Logger, Tools(d)...)
	return s
}

// Delivers is where tracker writes put something in front of somebody: the
// board every seat and person reads (WR-9).
const Delivers = "tracker"

var (
	readHints  = servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	writeHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}
	// A whole-value write states the same thing however often it is made.
	wholeHints   = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	destroyHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.Yes, Idempotent: servers.No, OpenWorld: servers.No}
)

// srv is the state one server keeps beside the node: nothing here is
// authoritative, it only lets a retry on this node make the same proposal as
// the attempt it repeats.
type srv struct {
	d Deps

	mu sync.Mutex
	// turns remembers when each turn first wrote, so a seat's op ids are
	// derived from the same instant on every retry (see turnStart).
	turns map[string]time.Time
	// minted remembers the key a create proposed under each operation, so
	// the repeat of a create whose answer was lost proposes the same key.
	minted map[state.OpID]string
	// reserved is the highest item number this node has proposed per
	// project, so two creates in flight on one node never propose one key.
	reserved map[string]int
}

func newSrv(d Deps) *srv {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Directory == nil {
		d.Directory = func() *authority.Directory { return authority.NewDirectory(nil, nil) }
	}
	return &srv{d: d, turns: map[string]time.Time{}, minted: map[state.OpID]string{}, reserved: map[string]int{}}
}

// view reads the projection; a closed node or a broken read is classed by
// the node (unavailable, internal_error).
func (s *srv) view(fn func(r pebble.Reader) error) error {
	if s.d.Node == nil {
		return authority.Refuse(authority.Unavailable, "The tracker has no state node on this hub node, so it cannot serve the call; try again once the node is up.")
	}
	return s.d.Node.View(fn)
}

// turnStart is the instant a seat's op ids in one turn are minted at. It
// must be the same on every retry of the turn: the first write of the turn
// records it in the projection, so even a node that restarted in between
// derives the same ids.
func (s *srv) turnStart(turn string) time.Time {
	s.mu.Lock()
	t, ok := s.turns[turn]
	s.mu.Unlock()
	if ok {
		return t
	}
	_ = s.view(func(r pebble.Reader) error {
		v, closer, err := r.Get([]byte(kTurn + turn))
		if err != nil {
			return nil
		}
		defer closer.Close()
		if len(v) == 8 {
			t, ok = time.UnixMilli(int64(binary.BigEndian.Uint64(v))), true
		}
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if prior, seen := s.turns[turn]; seen {
		return prior
	}
	if !ok {
		t = s.d.Now().Truncate(time.Millisecond)
	}
	if len(s.turns) > 50000 {
		// Turns are short; a day-old entry will not be retried from memory.
		cut := s.d.Now().Add(-24 * time.Hour)
		for k, v := range s.turns {
			if v.Before(cut) {
				delete(s.turns, k)
			}
		}
	}
	s.turns[turn] = t
	return t
}

// opCall is one write call on its way to the log.
type opCall struct {
	tool   string
	args   json.RawMessage
	id     state.OpID
	caller authority.Caller
	whole  bool // states a whole value: every call is its own operation
	common common
}

func (oc *opCall) seat() bool { return oc.caller.Kind == authority.KindAgent }

// begin decides which operation a write call is (WR-5, OPS-5): the op_id an
// operator sent back, a seat's id derived from its turn, or a fresh one. An
// op_id that does not belong to this very call is refused before anything is
// read or written.
func (s *srv) begin(c authority.Caller, tool string, in any, given string, whole bool) (*opCall, error) {
	args, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	oc := &opCall{tool: tool, args: args, caller: c, whole: whole}
	switch {
	case given != "" && c.Kind == authority.KindAgent:
		return nil, authority.Refuse(authority.Forbidden, "op_id is not taken from a seat: a seat's turn already makes a repeated call the same operation. Leave op_id out.")
	case given != "":
		id, err := state.ParseOpID(given)
		if err != nil {
			return nil, authority.Refuse(authority.Invalid, "op_id %q is not an op_id this hub hands out (%v); nothing was written. Send it exactly as an earlier answer gave it, or leave it out.", given, err)
		}
		if !id.Matches(tool, args) {
			return nil, authority.Refuse(authority.Invalid, "op_id %s belongs to a different call (another tool or other arguments), so nothing was written. It finishes only the call it was given for, sent again unchanged; to make this call, leave op_id out.", id).WithData("op_id", given)
		}
		oc.id = id
	case c.Kind == authority.KindAgent:
		if c.TurnKey == "" {
			return nil, authority.Refuse(authority.Forbidden, "A seat writes to the tracker only inside a turn, and this call carries none; nothing was written.")
		}
		start := s.turnStart(c.TurnKey)
		oc.common = common{Turn: c.TurnKey, TurnStart: start.UnixMilli()}
		if whole {
			oc.id = state.NewOpID(tool, args)
		} else {
			oc.id = state.DeriveOpID(c.TurnKey, start, tool, args)
		}
	default:
		oc.id = state.NewOpID(tool, args)
	}
	return oc, nil
}

// sub is an operation a call makes beside its own (a label declaration
// before it, a dependency change after it). Its id is derived from the
// call's, so repeating the call repeats exactly the same sub-operations and
// each lands once.
func (oc *opCall) sub(name string, args any) *opCall {
	b, _ := json.Marshal(args)
	tool := oc.tool + "#" + name
	return &opCall{tool: tool, args: b, caller: oc.caller, whole: oc.whole, common: oc.common,
		id: state.DeriveOpID(string(oc.id), oc.id.Minted(), tool, b)}
}

// recorded answers an operation this node's ledger already holds, before
// anything is checked again: a retried update whose first attempt landed
// must not now be refused as stale by its own effect.
func (s *srv) recorded(oc *opCall) (state.Answer, bool, error) {
	if s.d.Node == nil {
		return state.Answer{}, false, nil
	}
	a, ok := s.d.Node.Vouches(oc.id)
	if !ok || a.Outcome != state.Applied {
		return state.Answer{}, false, nil
	}
	if a.Refusal != nil {
		return a, true, a.Refusal
	}
	return a, true, nil
}

// write appends one operation and answers where it stands. An unknown
// outcome comes back as a refusal that names the operation and the remedy,
// never as an answer carrying anything the write would have made.
func (s *srv) write(ctx context.Context, oc *opCall, kind string, payload any) (state.Answer, error) {
	if s.d.Node == nil {
		return state.Answer{}, authority.Refuse(authority.Unavailable, "The tracker has no state node on this hub node; nothing was written.")
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return state.Answer{}, err
	}
	a, err := s.d.Node.Write(ctx, state.Op{ID: oc.id, Tool: oc.tool, Args: oc.args, Kind: kind, Payload: body, Caller: oc.caller, At: s.d.Now().UTC()})
	if err != nil && a.Outcome == state.Unknown {
		return a, errUnknown
	}
	return a, err
}

// errUnknown marks a write whose outcome is unknown; each tool words the
// refusal for its own call with unknownRefusal.
var errUnknown = errors.New("tracker: outcome unknown")

// unknownRefusal says a write may or may not have landed: under which
// operation, and what to do about it, for this caller. what names the write
// ("the item", "the change"); extra adds what the tool can say about it.
func (s *srv) unknownRefusal(oc *opCall, what, extra string) *authority.Refusal {
	var b strings.Builder
	vouched := true
	if s.d.Node != nil {
		_, vouched = s.d.Node.Vouches(oc.id)
	}
	tool := strings.SplitN(oc.tool, "#", 2)[0]
	switch {
	case !vouched:
		fmt.Fprintf(&b, "This node cannot tell whether %s landed (operation %s): the operation is older than anything its record reaches. ", what, oc.id)
		b.WriteString(extra)
		b.WriteString("Look first (get_work_item, list_work_items) before writing it again: repeating exactly the same call is safe, but it answers the same way until the write reaches this node.")
	case oc.whole:
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), oc.id)
		b.WriteString(extra)
		fmt.Fprintf(&b, "Repeating %s is harmless: each call states the same whole value again.", tool)
	case oc.seat():
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), oc.id)
		b.WriteString(extra)
		fmt.Fprintf(&b, "Make exactly the same %s call again, with the same arguments, before any other %s call: unchanged it is the same operation and takes effect once. A reworded call would be a new operation.", tool, tool)
	default:
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), oc.id)
		b.WriteString(extra)
		fmt.Fprintf(&b, "Send the same %s call again with op_id %s and the same arguments to finish it; without the op_id it would be a new operation.", tool, oc.id)
	}
	return authority.Refuse(authority.Unavailable, "%s", b.String()).WithData("outcome", string(state.Unknown)).WithData("op_id", string(oc.id))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeOut is what every write answers (WR-1, OPS-5).
type writeOut struct {
	Outcome  string `json:"outcome"`
	Position uint64 `json:"position,omitempty"`
	// OpID is answered on the operator surface, where it is how a caller
	// finishes a write; a seat's turn already is its operation's identity.
	OpID string `json:"op_id,omitempty"`
	Note string `json:"note,omitempty"`
}

func (oc *opCall) out(a state.Answer) writeOut {
	w := writeOut{Outcome: string(a.Outcome), Position: a.Position}
	if !oc.seat() {
		w.OpID = string(oc.id)
	}
	if a.Outcome == state.Pending {
		w.Note = "The write is durable in the log but this node has not shown it yet; a read here may not see it for a moment."
	}
	return w
}

// ---- the directory ----

func (s *srv) dir() *authority.Directory {
	if d := s.d.Directory(); d != nil {
		return d
	}
	return authority.NewDirectory(nil, nil)
}

// unitProject finds the unit that declares a project key.
func (s *srv) unitProject(key string) (authority.Unit, bool) {
	for _, u := range s.dir().Units() {
		if u.Project != "" && strings.EqualFold(u.Project, key) {
			return u, true
		}
	}
	return authority.Unit{}, false
}

func declOf(u authority.Unit) projectDecl {
	return projectDecl{Key: strings.ToUpper(u.Project), Name: u.Name, Unit: u.ID, Lead: u.Lead}
}

// resolveProject decides which project a call is about: the one named, or
// the caller's own unit's. A project that exists neither in the directory
// nor on the board is the argument's fault.
func (s *srv) resolveProject(r pebble.Reader, c authority.Caller, arg string) (projectDecl, *project, error) {
	key := strings.ToUpper(strings.TrimSpace(arg))
	if key == "" {
		seat, ok := s.dir().Seat(c.Seat)
		var u authority.Unit
		if ok {
			u, ok = s.dir().Unit(seat.Unit)
		}
		if !ok || u.Project == "" {
			return projectDecl{}, nil, authority.Refuse(authority.Invalid, "project is required: your unit owns no project to default to. Name one (list_projects shows them).")
		}
		key = strings.ToUpper(u.Project)
	}
	p, err := readProject(r, key)
	if err != nil {
		return projectDecl{}, nil, err
	}
	if u, ok := s.unitProject(key); ok {
		return declOf(u), p, nil
	}
	if p != nil {
		return projectDecl{Key: p.Key, Name: p.Name, Unit: p.Unit, Lead: p.Lead}, p, nil
	}
	return projectDecl{}, nil, authority.Refuse(authority.Invalid, "project %s is no project of this company (list_projects shows them).", key)
}

// lead is a project's lead as the directory says now, falling back to the
// one recorded when the project was declared.
func (s *srv) lead(d projectDecl) string {
	if u, ok := s.unitProject(d.Key); ok {
		return u.Lead
	}
	return d.Lead
}

// mayLead reports whether the caller leads the project or administers the
// company.
func (s *srv) mayLead(c authority.Caller, d projectDecl) bool {
	if l := s.lead(d); l != "" && strings.EqualFold(l, c.Seat) {
		return true
	}
	seat, ok := s.dir().Seat(c.Seat)
	return ok && seat.Admin
}

// seatArg checks that an argument names a seat, and answers its handle as
// the directory spells it. Naming nobody is the argument's fault (REF-3).
func (s *srv) seatArg(field, handle string) (string, error) {
	seat, ok := s.dir().Seat(strings.TrimSpace(handle))
	if !ok {
		return "", authority.Refuse(authority.Invalid, "%s names %q, and nobody in the company has that handle (lookup_colleague finds people).", field, handle)
	}
	return seat.Handle, nil
}

var mentionRE = regexp.MustCompile(`(?:^|[^\w@])@([A-Za-z0-9][A-Za-z0-9_.-]*)`)

// mentions finds the seats a text names as @handle; a name that is nobody's
// handle is left as text.
func (s *srv) mentions(body string) []string {
	var out []string
	for _, m := range mentionRE.FindAllStringSubmatch(body, -1) {
		h := strings.TrimRight(m[1], ".-")
		if seat, ok := s.dir().Seat(h); ok && !slices.Contains(out, seat.Handle) {
			out = append(out, seat.Handle)
		}
	}
	return out
}
