package agent

import (
	"context"
	"encoding/json"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The runtime consumes the hub through these interfaces, which the hub's
// wiring implements; this package never imports the hub.

// Hub is what the runtime needs of the hub.
type Hub interface {
	// Surface is a seat's tools as they are now, frozen: its own per-role
	// children's first, then the company's (CAT-10, CAT-11). A turn keeps
	// the surface it started with (CFG-7).
	Surface(seat string) Surface
	// ClaimSeat makes the node act for a seat, starting its per-role
	// children; ReleaseSeat stops them (CFG-6).
	ClaimSeat(ctx context.Context, seat string) error
	ReleaseSeat(ctx context.Context, seat string) error
}

// Surface is the tools one seat is offered, and the router that calls
// them as that seat.
type Surface interface {
	Tools() []Tool
	// Call decides, routes and sanitises one call (the hub's router): the
	// caller travels in the trusted metadata, never in the arguments. It
	// always answers a result; a refusal is a failed result with a class.
	Call(ctx context.Context, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult
}

// A Surface that knows which of the seat's own tool servers are down names
// them, and the turn is told at its start: the
// seat's mailbox does not wait on a child that failed (FLT-4).
type downReporter interface {
	Down() []string
}

// Tool is one tool of a seat's surface, with what the runtime decides on:
// its hints (three-valued, CAT-7) and where it delivers (CAT-8).
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Hints       servers.Hints
	Delivers    string
	// Source is builtin or mcp:<server> (CAT-1).
	Source string
}

// ProvenReadOnly reports a tool whose hints prove it writes nothing: an
// unknown hint proves nothing (CAT-7).
func (t Tool) ProvenReadOnly() bool { return t.Hints.ReadOnly == servers.Yes }

// Reaches reports whether calling the tool counts as reaching somebody
// outside the turn for the delivery fence: it delivers somewhere, or its
// hints are unknown, since an unannotated tool may well deliver (CAT-7,
// CAT-8, WR-9).
func (t Tool) Reaches() bool { return t.Delivers != "" || t.Hints.ReadOnly == servers.Unknown }
