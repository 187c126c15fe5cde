package toolpin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// What the pins keep is on the node's log like every other write, and
// projected under "tp/": each tool's pin (its last approval and its last
// rejection), a counter that moves with every decision, so a node can tell
// cheaply that another node decided something, and the baseline.
const (
	kPin      = "tp/pin/" // + server \x00 tool -> Pin
	kVersion  = "tp/ver"  // -> uint64 decisions applied
	kBaseline = "tp/base" // -> Baseline, the first one written
)

// Operation kinds, one projector each.
const (
	KindDecided  = "hub.tool.decided"
	KindBaseline = "hub.tool.baseline"
)

// Projectors returns the pins' projectors; the node registers them beside
// the first-party servers' when it opens.
func Projectors() []state.Projector {
	return []state.Projector{
		servers.Projector(KindDecided, applyDecided),
		servers.Projector(KindBaseline, applyBaseline),
	}
}

// Verdict is what a person decided about a fingerprint.
type Verdict string

// The two verdicts.
const (
	Approve Verdict = "approve"
	Reject  Verdict = "reject"
)

// Key names a tool across the fleet: its server's template name and the
// name the server itself gives it (never a prefixed or seat's name), so
// every seat's child of one template shares one approval (CAT-1).
type Key struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

func (k Key) row() string { return kPin + k.Server + "\x00" + k.Tool }

// Decided is one decision as the log keeps it: which definition, by whom,
// when. OperatorID is the credential behind the call (OPS-4), whatever
// seat it was attributed to.
type Decided struct {
	Fingerprint string         `json:"fingerprint"`
	Def         Def            `json:"def"`
	By          servers.Author `json:"by"`
	OperatorID  string         `json:"operator_id,omitempty"`
	At          time.Time      `json:"at"`
}

// Pin is what the log says of one tool: the definition last approved, and
// the last one rejected. A tool is offered only while what its server
// lists has the approved fingerprint.
type Pin struct {
	Key
	Approved *Decided `json:"approved,omitempty"`
	Rejected *Decided `json:"rejected,omitempty"`
}

// Decision is the payload of a decision: one verdict on one or more tools
// of one server, each at the fingerprint the person saw.
type Decision struct {
	Server  string        `json:"server"`
	Verdict Verdict       `json:"verdict"`
	Tools   []DecidedTool `json:"tools"`
}

// DecidedTool is one tool of a Decision, with the definition decided.
type DecidedTool struct {
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	Def         Def    `json:"def"`
}

func applyDecided(a *servers.Apply) (any, error) {
	var d Decision
	if err := a.Payload(&d); err != nil {
		return nil, err
	}
	if d.Verdict != Approve && d.Verdict != Reject {
		return nil, authority.Refuse(authority.Invalid, "A decision is approve or reject, not %q.", d.Verdict)
	}
	for _, t := range d.Tools {
		k := Key{Server: d.Server, Tool: t.Tool}
		p := Pin{Key: k}
		if _, err := state.GetJSON(a.R, k.row(), &p); err != nil {
			return nil, err
		}
		rec := &Decided{Fingerprint: t.Fingerprint, Def: t.Def, By: a.By, OperatorID: a.Op.Caller.OperatorID, At: a.At()}
		if d.Verdict == Approve {
			p.Approved = rec
			if p.Rejected != nil && p.Rejected.Fingerprint == t.Fingerprint {
				p.Rejected = nil
			}
		} else {
			p.Rejected = rec
		}
		if err := state.SetJSON(a.B, k.row(), p); err != nil {
			return nil, err
		}
	}
	var v uint64
	if _, err := state.GetJSON(a.R, kVersion, &v); err != nil {
		return nil, err
	}
	res := Decisions{Verdict: d.Verdict}
	for _, t := range d.Tools {
		res.Tools = append(res.Tools, DecidedRef{Tool: t.Tool, Fingerprint: t.Fingerprint})
	}
	return res, state.SetJSON(a.B, kVersion, v+1)
}

// Decisions is what a decision's operation answers, recorded with it: a
// retry of the same operation answers the same tools.
type Decisions struct {
	Verdict Verdict      `json:"verdict"`
	Tools   []DecidedRef `json:"tools"`
}

// DecidedRef names a tool decided, at its fingerprint.
type DecidedRef struct {
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
}

// Baseline is which servers were in the company when pinning began on
// this log, recorded once by the first node to start with pinning. A
// server it names that declares no trust key keeps today's behaviour
// (trust: auto); every server added after it is pinned unless it says
// otherwise. Upgraded says the log held operations before: a new
// company's log starts empty, and its baseline names no server.
type Baseline struct {
	Servers  []string  `json:"servers"`
	Upgraded bool      `json:"upgraded"`
	At       time.Time `json:"at"`
}

func applyBaseline(a *servers.Apply) (any, error) {
	var b Baseline
	if err := a.Payload(&b); err != nil {
		return nil, err
	}
	found, err := state.Exists(a.R, kBaseline)
	if err != nil || found {
		// The first baseline stands: two nodes starting at once agree on
		// the one that landed first.
		return nil, err
	}
	b.At = a.At()
	return nil, state.SetJSON(a.B, kBaseline, b)
}

// Store reads and writes the pins on a node.
type Store struct {
	node   *state.Node
	writes *servers.Writes
}

// NewStore is the pins over node, which must have the pins' projectors.
func NewStore(node *state.Node) *Store {
	return &Store{node: node, writes: servers.NewWrites(node, servers.WritesOptions{Server: "the hub's tool approvals", Look: "list_tool_changes"})}
}

// Pins reads every tool's pin.
func (s *Store) Pins() (map[Key]Pin, error) {
	out := map[Key]Pin{}
	err := s.node.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(kPin), UpperBound: state.Upper(kPin)})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			var p Pin
			if err := state.DecodeJSON(it.Key(), it.Value(), &p); err != nil {
				return err
			}
			out[p.Key] = p
		}
		return it.Error()
	})
	return out, err
}

// Baseline answers the log's baseline, writing one first if it has none:
// servers are the company's servers now, named only if the log already
// held operations (an upgrade). Whatever was written, the baseline that
// landed first is answered.
func (s *Store) Baseline(ctx context.Context, servers []string) (Baseline, error) {
	if b, ok, err := s.baseline(); err != nil || ok {
		return b, err
	}
	b := Baseline{Upgraded: s.node.Position() > 0}
	if b.Upgraded {
		b.Servers = servers
	}
	payload, err := json.Marshal(b)
	if err != nil {
		return Baseline{}, err
	}
	// The hub writes it as itself: an operator-kind caller no credential
	// can be, recorded for whoever reads the log.
	hub := authority.Caller{Seat: authority.TokenLoginPrefix + "hub", Kind: authority.KindOperator}
	a, err := s.node.Write(ctx, state.Op{Tool: KindBaseline, Args: payload, Kind: KindBaseline, Payload: payload, Caller: hub})
	if err != nil {
		return Baseline{}, err
	}
	if a.Outcome == state.Pending {
		// Durable, not yet applied here (a fleet's log slow to reach
		// this node at start): what landed first is read once it is.
		if err := s.node.WaitFor(ctx, a.Position); err != nil {
			return Baseline{}, err
		}
	}
	b, ok, err := s.baseline()
	if err == nil && !ok {
		err = errors.New("toolpin: the baseline written is not in the projection")
	}
	return b, err
}

func (s *Store) baseline() (Baseline, bool, error) {
	var b Baseline
	var found bool
	err := s.node.View(func(r pebble.Reader) error {
		var err error
		found, err = state.GetJSON(r, kBaseline, &b)
		return err
	})
	return b, found, err
}

// Version is the number of decisions applied on this node. Read before
// the pins, it is where Follow starts from.
func (s *Store) Version() (uint64, error) {
	var v uint64
	err := s.node.View(func(r pebble.Reader) error {
		_, err := state.GetJSON(r, kVersion, &v)
		return err
	})
	return v, err
}

// Follow calls changed each time this node's projection applies a
// decision past version seen, whichever node made it, until ctx ends. It
// is how an approval on one node releases the tool on every node.
//
// No decision is missed, however soon after another it lands: the
// projection's position is read before the version, so a decision
// applied while changed runs (or before the loop first looks) is past
// that position, and the wait for the next one returns at once.
func (s *Store) Follow(ctx context.Context, seen uint64, changed func()) {
	for {
		pos := s.node.Position()
		if v, err := s.Version(); err == nil && v != seen {
			seen = v
			changed()
		}
		if err := s.node.WaitFor(ctx, pos+1); err != nil {
			return
		}
	}
}

// Decide records a verdict as call's operation (WR-1, OPS-5): written
// once whatever the retries, attributed to the caller. build says what to
// decide; it runs only for an operation this node has not answered yet,
// so a retry of one that landed answers what it answered, whatever is
// held now. A decision that would change nothing (a rejection of what is
// already rejected) is answered unchanged and writes nothing, with no
// Decisions.
func (s *Store) Decide(ctx context.Context, call *servers.Call, build func() (Decision, error)) (servers.WriteOut, *Decisions, error) {
	return servers.Write[Decisions](ctx, s.writes, call, func(r pebble.Reader) (servers.Intent, error) {
		d, err := build()
		if err != nil {
			return servers.Intent{}, err
		}
		same := 0
		for _, t := range d.Tools {
			p := Pin{}
			if _, err := state.GetJSON(r, Key{Server: d.Server, Tool: t.Tool}.row(), &p); err != nil {
				return servers.Intent{}, err
			}
			last := p.Approved
			if d.Verdict == Reject {
				last = p.Rejected
			}
			if last != nil && last.Fingerprint == t.Fingerprint {
				same++
			}
		}
		if same == len(d.Tools) {
			return servers.Intent{}, nil
		}
		return servers.Intent{Kind: KindDecided, Payload: d, What: "the decision on " + d.Server + "'s " + names(d.Tools)}, nil
	})
}

// Begin is the operation a decision call is (servers.Writes.Begin).
func (s *Store) Begin(c authority.Caller, tool string, in servers.WriteInput) (*servers.Call, error) {
	return s.writes.Begin(c, tool, in, false)
}

func names(ts []DecidedTool) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Tool)
	}
	return strings.Join(n, ", ")
}
