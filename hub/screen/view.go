package screen

import (
	"sort"
	"strings"

	"github.com/crewlet/hub/servers"
)

// The view model: what the hub tells the screen, shaped for reading, not
// for the hub's own bookkeeping. The hub fills Server and Tool from its
// status table and catalogues (hub/screen_backend.go); the screen derives
// the rest. A fleet adds cells to a server, one per live node, and nothing
// here changes.

// Server is one configured MCP server's row.
type Server struct {
	Name   string
	Shared bool
	// State is the row's state: Running, Partly failing, Failing, Waiting
	// for credentials, Not started or Not reported.
	State string
	// Cells are what each live node reports of it.
	Cells    []Cell
	Launch   Launch
	Unlisted []string
}

// Cell is one node's report of a server.
type Cell struct {
	Node  string
	State string
	// Reason is the node's full reason, without the seat it concerns.
	Reason string
	// Seat is the seat whose child the reason is about; empty for a
	// shared server.
	Seat        string
	NextRestart string
	Tools       int
	// Reasons is every distinct reason the node gives, each with its
	// seats: a failing seat's and a waiting seat's both. Empty when the
	// node gives one reason only as Reason (a node that does not report
	// the server).
	Reasons []CellReason
	// ReasonsOmitted counts the reasons another node's heartbeat left
	// out; they are in that node's log.
	ReasonsOmitted int
}

// CellReason is one distinct reason of a node's, and the seats whose
// children give it (none for a shared server).
type CellReason struct {
	State, Text string
	Seats       []string
	NextRestart string
}

// ReasonList is the cell's reasons, its one Reason as a list where it
// gives no list.
func (c Cell) ReasonList() []CellReason {
	if len(c.Reasons) > 0 || c.Reason == "" {
		return c.Reasons
	}
	r := CellReason{State: c.State, Text: c.Reason, NextRestart: c.NextRestart}
	if c.Seat != "" {
		r.Seats = []string{c.Seat}
	}
	return []CellReason{r}
}

// Launch is how a server is started, as the operator surface shows it:
// references as written, literal values masked.
type Launch struct {
	Transport string
	Command   string
	Args      []string
	URL       string
	Env       map[string]string
	Headers   map[string]string
}

// Tool is one catalogue row.
type Tool struct {
	Name        string
	Source      string
	Description string
	Hints       servers.Hints
	// Delivers is where a call lands in front of somebody; empty for
	// nowhere.
	Delivers string
	Args     int
	// PerSeat marks a tool of a seat's own child: not offered to the
	// operator, shown so its server's tools can be judged.
	PerSeat bool
	// Server is the first-party server that serves a builtin tool
	// (tracker, knowledge, ...): the screen folds the builtins by it.
	// Empty for any other tool.
	Server string
	// Held is why a third-party tool is held until a person approves it
	// (new, changed or rejected); empty for a tool offered.
	Held string
}

// Note is a row's reason, with the node and seats it concerns and the
// state it explains.
type Note struct {
	Node, Text string
	Seats      []string
	State      string
}

// noteRank orders a row's reasons: what is broken, then what waits, then
// the rest.
func noteRank(state string) int {
	switch state {
	case "Failing", "Partly failing":
		return 0
	case "Waiting for credentials":
		return 1
	}
	return 2
}

// Reasons is every distinct reason the row's nodes give, each with its
// node and seats, failures first, then waits, then what has not started
// (MCP-12): a server with a failing seat and a waiting one shows both
// sentences and both seats, not the failure alone.
func (s Server) Reasons() []Note {
	var out []Note
	for _, c := range s.Cells {
		for _, r := range c.ReasonList() {
			out = append(out, Note{Node: c.Node, Text: r.Text, Seats: r.Seats, State: r.State})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return noteRank(out[i].State) < noteRank(out[j].State) })
	return out
}

// Reason is the row's first reason (see Reasons): the first failure, else
// the first wait, else what a node says of a server that has not started;
// nil when no node says anything, as of a server that runs.
func (s Server) Reason() *Note {
	if all := s.Reasons(); len(all) > 0 {
		return &all[0]
	}
	return nil
}

// ToolCount is how many tools a server has filed: the most any node
// reports.
func (s Server) ToolCount() int {
	n := 0
	for _, c := range s.Cells {
		n = max(n, c.Tools)
	}
	return n
}

// Reach says who a server serves.
func (s Server) Reach() string {
	if s.Shared {
		return "Shared: one instance serves every seat and the operator catalogue"
	}
	return "Per seat: each agent seat that declares credentials for it under mcp_env gets its own child; its tools are that seat's alone"
}

// Why says why a server has no tools: its reason, else its state.
func (s Server) Why() string {
	if n := s.Reason(); n != nil {
		return n.Text
	}
	if s.State == "Running" {
		return "its server listed no tools"
	}
	return "it is " + strings.ToLower(s.State)
}

// NoToolsYet says why a server that is neither failing nor waiting has
// filed no tools: it is in its first start (Not started), runs and lists
// none, or what its node says of it.
func (s Server) NoToolsYet() string {
	switch {
	case s.State == "Running":
		return "It runs and lists none."
	case s.Reason() != nil:
		return s.Reason().Text
	case s.State == "Not started":
		return "It is starting; its tools appear here once it lists them."
	}
	return "It is " + strings.ToLower(s.State) + "; its tools appear here once it lists them."
}

// Assertion is the strongest thing a tool's hints positively say about
// what a call does, and the class its cell is styled with.
type Assertion struct {
	Label, Class string
}

// Asserts reads the strongest positive assertion of a tool's hints.
// Unknown is its own answer, never a read (CAT-7): a tool whose server
// said nothing is "unknown", the row to check before granting a seat a
// new server. Read-only outranks the rest, as the protocol reads
// destructive and idempotent only of a tool that writes.
func Asserts(h servers.Hints) Assertion {
	idem := ""
	if h.Idempotent == servers.Yes {
		idem = ", idempotent"
	}
	switch {
	case h.ReadOnly == servers.Yes:
		return Assertion{"read-only", "assert-read"}
	case h.Destructive == servers.Yes:
		return Assertion{"destructive" + idem, "assert-destructive"}
	case h.Destructive == servers.No:
		return Assertion{"writes, not destructive" + idem, "assert-write"}
	case h.ReadOnly == servers.No:
		return Assertion{"writes" + idem, "assert-write"}
	case h.Idempotent == servers.Yes:
		return Assertion{"idempotent", "assert-write"}
	}
	return Assertion{"unknown", "assert-unknown"}
}

// Reaches says whether a tool reaches outside the company (open_world).
func Reaches(h servers.Hints) string { return h.OpenWorld.String() }

// Group is one source's part of the catalogue.
type Group struct {
	Source string
	// Server is the server behind an mcp: source, when it is configured.
	Server *Server
	Tools  []Tool
	// PerSeat marks the group of a per-seat server.
	PerSeat bool
	// Parts fold the builtin group by the first-party server that serves
	// each tool; nil for any other group.
	Parts []Part
}

// Part is one first-party server's tools within the builtin group.
type Part struct {
	Server string
	Tools  []Tool
}

// Missing reports a configured server's group with no tool because the
// server failed or waits for a credential: it reads as a missing group,
// never as builtins shrinking. A server still in its first start, or
// running with nothing listed, is not missing: nothing is wrong with it
// (Pending).
func (g Group) Missing() bool {
	if g.Server == nil || len(g.Tools) > 0 {
		return false
	}
	switch g.Server.State {
	case "Failing", "Partly failing", "Waiting for credentials":
		return true
	}
	return false
}

// Pending reports a configured server's group with no tool yet that is
// not missing: its server is starting, or runs and lists none.
func (g Group) Pending() bool { return g.Server != nil && len(g.Tools) == 0 && !g.Missing() }

// group sorts a catalogue by source: each configured server in the order
// the company declares them (present or missing), then any other source,
// then the builtins, each group's tools by name. The servers an operator
// added are what the page is read for; the builtins (some sixty tools of
// the hub's own first-party servers) come last, folded by server.
func group(tools []Tool, rows []Server) []Group {
	by := map[string][]Tool{}
	for _, t := range tools {
		by[t.Source] = append(by[t.Source], t)
	}
	for _, ts := range by {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	}
	builtin := by["builtin"]
	delete(by, "builtin")
	var out []Group
	for i := range rows {
		src := "mcp:" + rows[i].Name
		out = append(out, Group{Source: src, Server: &rows[i], Tools: by[src], PerSeat: !rows[i].Shared})
		delete(by, src)
	}
	rest := make([]string, 0, len(by))
	for src := range by {
		rest = append(rest, src)
	}
	sort.Strings(rest)
	for _, src := range rest {
		out = append(out, Group{Source: src, Tools: by[src]})
	}
	if len(builtin) > 0 {
		out = append(out, Group{Source: "builtin", Tools: builtin, Parts: parts(tools)})
	}
	return out
}

// parts folds the builtin tools by first-party server, in the order the
// catalogue first names each server (the order the hub mounts them), each
// server's tools by name.
func parts(tools []Tool) []Part {
	var out []Part
	at := map[string]int{}
	for _, t := range tools {
		if t.Source != "builtin" {
			continue
		}
		i, ok := at[t.Server]
		if !ok {
			i = len(out)
			at[t.Server] = i
			out = append(out, Part{Server: t.Server})
		}
		out[i].Tools = append(out[i].Tools, t)
	}
	for _, p := range out {
		sort.SliceStable(p.Tools, func(i, j int) bool { return p.Tools[i].Name < p.Tools[j].Name })
	}
	return out
}

// nodes is every node any row has a cell for, in the order first seen:
// the servers table's columns.
func nodes(rows []Server) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, c := range r.Cells {
			if !seen[c.Node] {
				seen[c.Node] = true
				out = append(out, c.Node)
			}
		}
	}
	return out
}

// CellOn is a row's cell for a node; a node that reports nothing of the
// server reads Not reported.
func (s Server) CellOn(node string) Cell {
	for _, c := range s.Cells {
		if c.Node == node {
			return c
		}
	}
	return Cell{Node: node, State: "Not reported"}
}

// stateClass styles a state.
func stateClass(state string) string {
	return "state-" + strings.ReplaceAll(strings.ToLower(state), " ", "-")
}
