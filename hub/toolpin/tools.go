package toolpin

import (
	"context"
	"log/slog"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/toolscan"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Change is one held tool as a person deciding it reads it: what its
// server says of it now, what was approved before (if anything), what
// moved between the two, and what the scanner flagged.
type Change struct {
	Server string `json:"server"`
	// Tool is the name the server gives it; Name the one callers use
	// (behind the server's tool_prefix).
	Tool string `json:"tool"`
	Name string `json:"name"`
	// Seats names the seats whose own children list it, for a per-role
	// server; empty for a shared one.
	Seats []string `json:"seats,omitempty"`
	// State is new (never approved), changed (moved since its approval)
	// or rejected (this very definition was rejected).
	State       string   `json:"state"`
	Fingerprint string   `json:"fingerprint"`
	Proposed    Def      `json:"proposed"`
	Approved    *Decided `json:"approved,omitempty"`
	Rejected    *Decided `json:"rejected,omitempty"`
	// The differences from the approved definition, for a changed tool.
	TitleChanged       bool           `json:"title_changed,omitempty"`
	DescriptionChanged bool           `json:"description_changed,omitempty"`
	InputSchema        []SchemaChange `json:"input_schema_changes,omitempty"`
	OutputSchema       []SchemaChange `json:"output_schema_changes,omitempty"`
	Annotations        []SchemaChange `json:"annotation_changes,omitempty"`
	// Flags are the scanner's findings in the proposed description; they
	// inform the decision and make none.
	Flags []toolscan.Flag `json:"flags"`
}

// Describe builds the Change a person reads for a held tool: proposed is
// what the server lists now, pin what the log holds of the tool.
func Describe(server, tool, name, state, fingerprint string, proposed Def, pin Pin, flags []toolscan.Flag) Change {
	c := Change{Server: server, Tool: tool, Name: name, State: state, Fingerprint: fingerprint, Proposed: proposed,
		Approved: pin.Approved, Rejected: pin.Rejected, Flags: flags}
	if c.Flags == nil {
		c.Flags = []toolscan.Flag{}
	}
	if a := pin.Approved; a != nil {
		c.TitleChanged = a.Def.Title != proposed.Title
		c.DescriptionChanged = a.Def.Description != proposed.Description
		// The members were read as JSON when they were filed; a diff that
		// fails to read one shows no change rather than failing the list.
		c.InputSchema, _ = Diff(a.Def.InputSchema, proposed.InputSchema)
		c.OutputSchema, _ = Diff(a.Def.OutputSchema, proposed.OutputSchema)
		c.Annotations, _ = Diff(a.Def.Annotations, proposed.Annotations)
	}
	return c
}

// Deps is what the tools are given by the hub that mounts them.
type Deps struct {
	Store     *Store
	Directory func() *authority.Directory
	// Held lists the tools this node holds now.
	Held func() []Change
	// Refresh files the held servers again from the log, so a decision's
	// answer is given once this node offers (or holds) the tools as
	// decided.
	Refresh func()
}

type listIn struct {
	Server string `json:"server,omitempty" jsonschema:"only this server's held tools; leave out for every server"`
}

type listOut struct {
	Changes []Change `json:"changes"`
}

// DecideTool names one held tool and the fingerprint the person saw.
type DecideTool struct {
	Tool        string `json:"tool" jsonschema:"the tool, by the name list_tool_changes gives it (tool or name)"`
	Fingerprint string `json:"fingerprint" jsonschema:"the fingerprint list_tool_changes showed for it: a tool that changed since is refused stale_version"`
}

type decideIn struct {
	servers.OpIDArg
	Server   string       `json:"server" jsonschema:"the server whose held tools to decide"`
	Decision string       `json:"decision" jsonschema:"approve (offer the tool as its server lists it now) or reject (keep it out)"`
	Tools    []DecideTool `json:"tools,omitempty" jsonschema:"the tools to decide, each with the fingerprint you read; leave out to decide every tool of the server held now"`
}

// decidedOut is a tool in a decision's answer, and whether this node
// offers it now.
type decidedOut struct {
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	// Now is offered or held, on this node once the answer is given.
	Now string `json:"now"`
}

type decideOut struct {
	servers.WriteOut
	Server   string       `json:"server"`
	Decision string       `json:"decision"`
	Tools    []decidedOut `json:"tools"`
}

// Tools are the operator-only tools over the pins: one lists what is
// held, the other approves or rejects it (issue 28, item 3).
func Tools(d Deps) []servers.Tool {
	return []servers.Tool{
		servers.Typed("list_tool_changes",
			"List the third-party tools held until a person approves them: new tools of a pinned server, and tools whose definition changed since it was approved. Each shows what its server says now beside what was approved, what changed in the schemas and annotations, its fingerprint, and what the scanner flagged (hidden characters, text addressed to the model, credentials). For people, not seats.",
			servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}, "",
			func(_ context.Context, c authority.Caller, in listIn) (listOut, error) {
				if c.Kind == authority.KindAgent {
					return listOut{}, authority.Refuse(authority.Forbidden, "Which third-party tools are held is for people to review, not seats.")
				}
				out := listOut{Changes: []Change{}}
				for _, ch := range d.Held() {
					if in.Server == "" || ch.Server == in.Server {
						out.Changes = append(out.Changes, ch)
					}
				}
				return out, nil
			}).ForOperators(),
		servers.Typed("decide_tool_change",
			"Approve or reject held third-party tools of one server, each at the fingerprint list_tool_changes showed (or every tool of the server held now, if none is named). An approved tool is offered to seats and operators as its server lists it now; a rejected one stays out until a definition it lists is approved. Recorded on the log with who decided, for every node. For administrators.",
			servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}, "",
			func(ctx context.Context, c authority.Caller, in decideIn) (decideOut, error) {
				return decide(ctx, d, c, in)
			}).ForOperators(),
	}
}

func decide(ctx context.Context, d Deps, c authority.Caller, in decideIn) (decideOut, error) {
	if !authority.IsAdmin(c, d.Directory()) {
		return decideOut{}, authority.Refuse(authority.Forbidden, "Only an administrator decides which third-party tools the company's seats and operators are offered; ask one to review it with list_tool_changes.")
	}
	verdict := Verdict(in.Decision)
	if verdict != Approve && verdict != Reject {
		return decideOut{}, authority.Refuse(authority.Invalid, "decision is approve or reject, not %q.", in.Decision)
	}
	server := in.Server
	call, err := d.Store.Begin(c, "decide_tool_change", &in)
	if err != nil {
		return decideOut{}, err
	}
	wout, res, err := d.Store.Decide(ctx, call, func() (Decision, error) { return pick(d.Held(), server, verdict, in.Tools) })
	if err != nil {
		return decideOut{}, err
	}
	d.Refresh()
	held := map[string]bool{}
	for _, ch := range d.Held() {
		if ch.Server == server {
			held[ch.Tool] = true
		}
	}
	out := decideOut{WriteOut: wout, Server: server, Decision: in.Decision, Tools: []decidedOut{}}
	if res != nil {
		for _, t := range res.Tools {
			now := "offered"
			if held[t.Tool] {
				now = "held"
			}
			out.Tools = append(out.Tools, decidedOut{Tool: t.Tool, Fingerprint: t.Fingerprint, Now: now})
		}
	}
	return out, nil
}

// pick is the decision a call asks for, from what this node holds now:
// the tools named, each at the fingerprint the person read, or every
// held tool of the server.
func pick(all []Change, server string, verdict Verdict, named []DecideTool) (Decision, error) {
	var held []Change
	for _, ch := range all {
		if ch.Server == server {
			held = append(held, ch)
		}
	}
	if len(held) == 0 {
		return Decision{}, authority.Refuse(authority.NotFound, "Server %q has no tool held on this node; list_tool_changes lists what is held.", server)
	}
	dec := Decision{Server: server, Verdict: verdict}
	seen := map[string]bool{}
	add := func(ch Change) {
		// One decision per tool: a per-role server's children may list
		// one tool twice.
		if !seen[ch.Tool] {
			seen[ch.Tool] = true
			dec.Tools = append(dec.Tools, DecidedTool{Tool: ch.Tool, Fingerprint: ch.Fingerprint, Def: ch.Proposed})
		}
	}
	if len(named) == 0 {
		for _, ch := range held {
			add(ch)
		}
		return dec, nil
	}
	for _, want := range named {
		var found *Change
		for i, ch := range held {
			if ch.Tool == want.Tool || ch.Name == want.Tool {
				found = &held[i]
				if ch.Fingerprint == want.Fingerprint {
					break
				}
			}
		}
		switch {
		case found == nil:
			return Decision{}, authority.Refuse(authority.NotFound, "Server %q holds no tool %q on this node; list_tool_changes lists what is held.", server, want.Tool)
		case found.Fingerprint != want.Fingerprint:
			return Decision{}, authority.Refuse(authority.StaleVersion,
				"Tool %q changed since you read it: its server now lists it with fingerprint %s, not %s. Read it again with list_tool_changes and decide what it says now.",
				want.Tool, found.Fingerprint, want.Fingerprint).WithData("fingerprint", found.Fingerprint)
		}
		add(*found)
	}
	return dec, nil
}

// NewServer serves the tools under a trust, as the hub mounts it
// in-process.
func NewServer(d Deps, t servers.Trust, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tool_changes", Version: "1"}, nil)
	servers.Register(s, t, log, Tools(d)...)
	return s
}
