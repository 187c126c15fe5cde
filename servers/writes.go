package servers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/segmentio/encoding/json"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Writes is the write path every first-party server shares (WR-1..8,
// OPS-5): which operation a call is, the answer an operation this node
// already holds, the write itself, and what the caller is told when its
// outcome is unknown. A tool says only what is particular to it: the
// payload its decide function builds from the projection, and how the
// projector's result becomes its answer.
//
// A Writes is safe for concurrent use. It keeps no authoritative state:
// the turn memory it holds only saves a read of the projection.
type Writes struct {
	node *state.Node
	opts WritesOptions

	mu sync.Mutex
	// turns remembers when each turn (or operator's key) first wrote, so
	// its op ids are derived from the same instant on every retry; the
	// node keeps the same fact durably (state.Node.TurnStart).
	turns map[string]time.Time
	// keys holds the operations named by a key that are being written on
	// this node, by stem: a second call under the same key with other
	// arguments is refused while the first has not landed yet.
	keys map[string]*keyClaim
}

type keyClaim struct {
	id    state.OpID
	calls int
}

// WritesOptions configure a server's Writes. The zero value works.
type WritesOptions struct {
	// Server names the server in sentences ("the tracker").
	Server string
	// Look names the reads a caller should make before writing again when
	// this node cannot vouch for an operation ("get_work_item or
	// list_work_items").
	Look string
	// Now is the clock writes are stamped with; nil means time.Now.
	Now func() time.Time
}

// NewWrites is the write path over node. A nil node is allowed: every call
// is then refused unavailable, naming the server.
func NewWrites(node *state.Node, opts WritesOptions) *Writes {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Server == "" {
		opts.Server = "this server"
	}
	if opts.Look == "" {
		opts.Look = "this server's read tools"
	}
	return &Writes{node: node, opts: opts, turns: map[string]time.Time{}, keys: map[string]*keyClaim{}}
}

// Node is the state node writes go to (nil when there is none).
func (w *Writes) Node() *state.Node { return w.node }

// Now is the clock writes are stamped with.
func (w *Writes) Now() time.Time { return w.opts.Now() }

func (w *Writes) noNode() error {
	return authority.Refuse(authority.Unavailable, "%s has no state node on this hub node, so it cannot serve the call; nothing was written. Try again once the node is up.", upperFirst(w.opts.Server))
}

// View reads the projection; a closed node or a broken read is classed by
// the node (unavailable, internal_error).
func (w *Writes) View(fn func(r pebble.Reader) error) error {
	if w.node == nil {
		return w.noNode()
	}
	return w.node.View(fn)
}

// OpIDArg is the op_id argument of every write tool (OPS-5). Embed it in a
// write tool's input: Begin takes it out before the call's identity is
// computed, so the op_id never becomes part of the arguments it stands for.
type OpIDArg struct {
	OpID string `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

func (o *OpIDArg) takeOpID() string {
	id := o.OpID
	o.OpID = ""
	return id
}

// WriteInput is a write tool's input: a pointer to a struct embedding
// OpIDArg.
type WriteInput interface{ takeOpID() string }

// Call is one write call on its way to the log: which operation it is and
// who makes it.
type Call struct {
	Tool   string
	Caller authority.Caller
	ID     state.OpID
	args   json.RawMessage
	// whole: the call states a whole value, so every call is its own
	// operation and repeating it is harmless (WR-6).
	whole     bool
	turnStart time.Time
	// scope is the retry scope of a call its caller named (an operator's
	// key under its credential); "" for any other call.
	scope string
	// root is the call a sub-operation belongs to; nil for a tool's own.
	root *Call
}

// Seat reports whether the call is a seat's, made inside a turn.
func (c *Call) Seat() bool { return c.Caller.Kind == authority.KindAgent }

func (c *Call) top() *Call {
	if c.root != nil {
		return c.root
	}
	return c
}

// Begin decides which operation a write call is (WR-5, OPS-5, OPS-6): the
// op_id an operator sent back, the one an operator's key names, a seat's id
// derived from its turn, or a fresh one. An op_id that does not belong to
// this very call is refused before anything is read or written. whole marks
// a tool that states a whole value (write_project): each call is its own
// operation, unless its caller named it.
func (w *Writes) Begin(c authority.Caller, tool string, in WriteInput, whole bool) (*Call, error) {
	given := in.takeOpID()
	args, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	call := &Call{Tool: tool, Caller: c, args: args, whole: whole}
	switch {
	case given != "" && c.Kind == authority.KindAgent:
		return nil, authority.Refuse(authority.Forbidden, "op_id is not taken from a seat: a seat's turn already makes a repeated call the same operation. Leave op_id out.")
	case c.Operation != "" && c.Kind == authority.KindAgent:
		return nil, authority.Refuse(authority.Forbidden, "A seat's call names no operation of its own: its turn already makes a repeated call the same operation.")
	case given != "" && c.Operation != "":
		return nil, authority.Refuse(authority.Invalid, "op_id is not taken beside an Idempotency-Key: the key already names this call's operation. Leave op_id out, and send the request again with the same key to finish it.")
	case c.Operation != "":
		// The key is the caller's; scoped to its credential, the same key
		// from somebody else names a different operation.
		call.scope = keyScope(c)
		call.turnStart = w.turnStart(call.scope)
		call.ID = state.KeyedOpID(call.scope, call.turnStart, tool, args)
	case given != "":
		if call.ID, err = state.CheckOpID(given, tool, args); err != nil {
			return nil, err
		}
	case c.Kind == authority.KindAgent:
		if c.TurnKey == "" {
			return nil, authority.Refuse(authority.Forbidden, "A seat writes to %s only inside a turn, and this call carries none; nothing was written.", w.opts.Server)
		}
		call.turnStart = w.turnStart(c.TurnKey)
		if whole {
			call.ID = state.NewOpID(tool, args)
		} else {
			call.ID = state.DeriveOpID(c.TurnKey, call.turnStart, tool, args)
		}
	default:
		call.ID = state.NewOpID(tool, args)
	}
	return call, nil
}

// Sub is an operation a call makes beside its own (a label declaration
// before it, a dependency change after it). Its id is derived from the
// call's, so repeating the call repeats exactly the same sub-operations and
// each lands once.
func (c *Call) Sub(name string, args any) *Call {
	b, _ := json.Marshal(args)
	tool := c.Tool + "#" + name
	return &Call{Tool: tool, Caller: c.Caller, args: b, whole: c.whole, turnStart: c.turnStart, scope: c.scope, root: c.top(),
		ID: state.DeriveOpID(string(c.ID), c.ID.Minted(), tool, b)}
}

// turnStart is the instant a seat's op ids in one turn are minted at: the
// same on every retry of the turn, even on a node that restarted between
// them, because the first write of the turn records it in the projection.
// An operator's key is kept the same way, under its scope.
func (w *Writes) turnStart(turn string) time.Time {
	w.mu.Lock()
	t, ok := w.turns[turn]
	w.mu.Unlock()
	if ok {
		return t
	}
	if w.node != nil {
		t, ok = w.node.TurnStart(turn)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prior, seen := w.turns[turn]; seen {
		return prior
	}
	if !ok {
		t = w.opts.Now().Truncate(time.Millisecond)
	}
	if len(w.turns) > 50000 {
		// Turns are short; a day-old one is not retried from memory, and
		// the node still holds its start.
		cut := w.opts.Now().Add(-24 * time.Hour)
		for k, v := range w.turns {
			if v.Before(cut) {
				delete(w.turns, k)
			}
		}
	}
	w.turns[turn] = t
	return t
}

// Intent is the operation a decide function asks for, and how its answer
// is worded if its outcome is unknown.
type Intent struct {
	// Kind names the projector that applies the operation; empty means
	// there is nothing to write, answered as outcome unchanged.
	Kind    string
	Payload any
	// What names the write in sentences: "the item", "the merge of CORE-3".
	What string
	// IfUnknown is what the tool adds when the outcome is unknown ("If it
	// was filed, the key it has is CORE-7; that is not a receipt. "), with
	// UnknownData beside it in the refusal.
	IfUnknown   string
	UnknownData map[string]any
	// CannotTell, if set, replaces the whole sentence said when this node
	// cannot vouch for the operation (a declaration that precedes the
	// call's own write has its own remedy).
	CannotTell string
	// First are operations written before this one, in order, each its own
	// operation derived from the call (a label declaration the write
	// needs, WR-7). If one is refused or its outcome is unknown, the call
	// stops there and its own write is not made; the same call again
	// answers each step as it landed and then makes the write once.
	First []Step
}

// Step is an operation a call writes before its own: Name and Args derive
// its op_id from the call's, and Intent is what it writes.
type Step struct {
	Name   string
	Args   any
	Intent Intent
}

// Outcome values beyond the three every write has: a write that found
// nothing to change answers Unchanged and writes nothing.
const Unchanged state.Outcome = "unchanged"

// WriteOut is what every write answers (WR-1, OPS-5); tools embed it in
// their output.
type WriteOut struct {
	Outcome  state.Outcome `json:"outcome"`
	Position uint64        `json:"position,omitempty"`
	// OpID is answered on the operator surface, where it is how a caller
	// finishes a write; a seat's turn already is its operation's identity.
	OpID string `json:"op_id,omitempty"`
	Note string `json:"note,omitempty"`
}

// Out is the envelope for an answer of call.
func (c *Call) Out(a state.Answer) WriteOut {
	o := WriteOut{Outcome: a.Outcome, Position: a.Position}
	// An unchanged write made no operation to finish.
	if !c.Seat() && a.Outcome != Unchanged {
		o.OpID = string(c.top().ID)
	}
	if a.Outcome == state.Pending {
		o.Note = "The write is durable in the log but this node has not shown it yet; a read here may not see it for a moment."
	}
	return o
}

// Write makes the operation call is, once: an operation this node's ledger
// already answered is answered the same without deciding anything again
// (a retried update whose first attempt landed must not be refused as
// stale by its own effect); otherwise decide reads the projection and says
// what to write, and the write is made. R is the projector's result,
// decoded when the write is applied on this node (nil when it is pending
// or unchanged). An unknown outcome comes back as the refusal that says so
// for this caller, never with anything the write would have made.
func Write[R any](ctx context.Context, w *Writes, call *Call, decide func(r pebble.Reader) (Intent, error)) (WriteOut, *R, error) {
	if w.node == nil {
		return WriteOut{}, nil, w.noNode()
	}
	if call.scope != "" && call.root == nil {
		release, err := w.claimKey(call)
		if err != nil {
			return WriteOut{}, nil, err
		}
		defer release()
	}
	a, err := w.do(ctx, call, decide)
	if err != nil {
		return WriteOut{}, nil, err
	}
	out := call.Out(a)
	if a.Outcome != state.Applied || len(a.Result) == 0 {
		return out, nil, nil
	}
	res := new(R)
	if err := json.Unmarshal(a.Result, res); err != nil {
		return WriteOut{}, nil, fmt.Errorf("%s: decode the recorded result: %w", call.Tool, err)
	}
	return out, res, nil
}

func (w *Writes) do(ctx context.Context, call *Call, decide func(r pebble.Reader) (Intent, error)) (state.Answer, error) {
	if a, ok := w.node.Vouches(call.ID); ok && a.Outcome == state.Applied {
		if a.Refusal != nil {
			return a, a.Refusal
		}
		return a, nil
	}
	var in Intent
	if err := w.node.View(func(r pebble.Reader) error {
		var err error
		in, err = decide(r)
		return err
	}); err != nil {
		return state.Answer{}, err
	}
	if in.Kind == "" {
		return state.Answer{Outcome: Unchanged, Position: w.node.Position(), OpID: call.ID}, nil
	}
	for _, step := range in.First {
		if _, err := w.do(ctx, call.Sub(step.Name, step.Args), func(pebble.Reader) (Intent, error) { return step.Intent, nil }); err != nil {
			return state.Answer{}, err
		}
	}
	body, err := json.Marshal(in.Payload)
	if err != nil {
		return state.Answer{}, err
	}
	a, err := w.node.Write(ctx, state.Op{ID: call.ID, Tool: call.Tool, Args: call.args, Kind: in.Kind, Payload: body,
		Caller: call.Caller, At: w.opts.Now().UTC(), TurnStart: call.turnStart, Scope: call.scope})
	var unknown *state.UnknownOutcome
	if errors.As(err, &unknown) {
		return a, w.unknown(call, in, unknown.CannotTell)
	}
	return a, err
}

// unknown says a write may or may not have landed (WR-2, WR-4): under
// which operation, and what to do about it, for this caller. It is the one
// place these sentences are written.
func (w *Writes) unknown(call *Call, in Intent, cannotTell bool) *authority.Refusal {
	if !cannotTell {
		_, vouched := w.node.Vouches(call.ID)
		cannotTell = !vouched
	}
	top := call.top()
	what := in.What
	if what == "" {
		what = "the write"
	}
	var b strings.Builder
	switch {
	case cannotTell && in.CannotTell != "":
		b.WriteString(in.CannotTell)
		w.elsewhere(&b, top)
	case cannotTell:
		fmt.Fprintf(&b, "This node cannot tell whether %s landed (operation %s): the operation is older than anything its record reaches. ", what, top.ID)
		b.WriteString(in.IfUnknown)
		fmt.Fprintf(&b, "Look first (%s) before writing it again: repeating exactly the same call is safe, but it answers the same way until the write reaches this node.", w.opts.Look)
		w.elsewhere(&b, top)
	case top.scope != "":
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), top.ID)
		b.WriteString(in.IfUnknown)
		b.WriteString("Send the same request again with the same Idempotency-Key to finish it; under a new key it would be a new operation.")
	case top.whole:
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), top.ID)
		b.WriteString(in.IfUnknown)
		fmt.Fprintf(&b, "Repeating %s is harmless: each call states the same whole value again.", top.Tool)
	case top.Seat():
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), top.ID)
		b.WriteString(in.IfUnknown)
		fmt.Fprintf(&b, "Make exactly the same %s call again, with the same arguments, before any other %s call: unchanged it is the same operation and takes effect once. A reworded call would be a new operation.", top.Tool, top.Tool)
	default:
		fmt.Fprintf(&b, "%s may or may not have landed: the log's acknowledgement was lost (operation %s). ", upperFirst(what), top.ID)
		b.WriteString(in.IfUnknown)
		fmt.Fprintf(&b, "Send the same %s call again with op_id %s and the same arguments to finish it; without the op_id it would be a new operation.", top.Tool, top.ID)
	}
	r := authority.Refuse(authority.Unavailable, "%s", b.String()).
		WithData("outcome", string(state.Unknown)).WithData("op_id", string(top.ID))
	for k, v := range in.UnknownData {
		r = r.WithData(k, v)
	}
	return r
}

// elsewhere adds, for an operator in a fleet, the other way to finish an
// operation this node cannot vouch for: the same call with its op_id
// through another node, whose ledger may reach back that far (WR-4). A
// seat sends no op_id, and a node alone has no other node.
func (w *Writes) elsewhere(b *strings.Builder, top *Call) {
	if !w.node.Shared() || top.Seat() {
		return
	}
	fmt.Fprintf(b, " Or make the same %s call with op_id %s through another node of the fleet whose record reaches back that far: it finishes the operation, once.", top.Tool, top.ID)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
