package hub

import (
	"sort"
	"strings"
	"sync"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
)

// The states a server's row reads on the operator surface (MCP-12).
const (
	rowRunning     = "Running"
	rowPartly      = "Partly failing"
	rowFailing     = "Failing"
	rowWaiting     = "Waiting for credentials"
	rowNotStarted  = "Not started"
	rowNotReported = "Not reported"
)

// nodeCell is one node's report of a server: this node's own, and in a
// fleet one per other node from its heartbeat (FLT-2, MCP-12).
type nodeCell struct {
	Node  string `json:"node"`
	State string `json:"state"`
	// Reason is the one reason that explains State: the first failure's,
	// else the first wait's. Reasons holds every distinct one.
	Reason string `json:"reason,omitempty"`
	// Reasons is every distinct reason the node's instances give, each
	// with the seats it concerns: failures first, then waits, then the
	// rest. A server with a failing and a waiting instance shows both, so
	// the wait's sentence and seat are not hidden behind the failure.
	Reasons []cellReason `json:"reasons,omitempty"`
	// ReasonsOmitted counts the distinct reasons another node's heartbeat
	// left out (beatReasons); they are in that node's log.
	ReasonsOmitted int `json:"reasons_omitted,omitempty"`
	// NextRestart is when a down server is tried again (RFC 3339).
	NextRestart string `json:"next_restart,omitempty"`
	Tools       int    `json:"tools"`
	// Instances counts the node's instances of the server (one for a
	// shared server, one per seat it holds for a per-role one), by the
	// state each reads; a node with none has nothing to say about it.
	Instances int            `json:"instances"`
	Counts    map[string]int `json:"counts,omitempty"`
	// LastHeard is when a node that stopped heartbeating was last heard
	// from (RFC 3339); only on a Not reported cell.
	LastHeard string `json:"last_heard,omitempty"`
}

// cellReason is one distinct reason a node gives for a server, and the
// seats whose children give it (none for a shared server).
type cellReason struct {
	State  string   `json:"state"`
	Reason string   `json:"reason"`
	Seats  []string `json:"seats,omitempty"`
	// NextRestart is when the first of these down instances is tried
	// again (RFC 3339).
	NextRestart string `json:"next_restart,omitempty"`
}

type launch struct {
	Transport string            `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	URL       string            `json:"url,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

type serverRow struct {
	Name                string     `json:"name"`
	Shared              bool       `json:"shared"`
	State               string     `json:"state"`
	Reason              string     `json:"reason,omitempty"`
	Nodes               []nodeCell `json:"nodes"`
	Launch              launch     `json:"launch"`
	UnlistedAnnotations []string   `json:"unlisted_annotations"`
	// RefusedToolNames are the tool names its instances listed that the
	// hub does not offer, each with its hidden and non-ASCII characters
	// written as code points (issue 36).
	RefusedToolNames []string `json:"refused_tool_names,omitempty"`
}

// launchOf shows how a server is started, as GET /mcp-servers shows it:
// references as written, no literal that could be a credential (MCP-12).
func (h *Hub) launchOf(d config.MCPServer) launch {
	l := launch{Transport: d.EffectiveTransport(), Command: upstream.MaskURLs(d.Command), URL: upstream.MaskURLs(d.URL)}
	// Arguments are passed as written; anything in them that is a known
	// secret is redacted like a tool result, and a URL in one loses its
	// userinfo and query values.
	for _, a := range d.Args {
		if clean, err := h.clean.Text(a); err == nil {
			a = clean
		}
		l.Args = append(l.Args, upstream.MaskURLs(a))
	}
	mask := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = upstream.MaskValue(v)
		}
		return out
	}
	l.Env, l.Headers = mask(d.Env), mask(d.Headers)
	return l
}

// statusTable is what each instance reports for its server's row, under
// its own lock: supervision writes it as instances start, are held back,
// file their tools or stop, and the operator surface reads it, so neither
// ever takes the other's lock. An instance's own state is read from the
// instance, under the instance's lock.
type statusTable struct {
	// node names this node's cells: "this node" alone, its name in a
	// fleet.
	node  string
	mu    sync.Mutex
	insts map[string]*instanceReport // by instance key
}

// instanceReport is one instance's part of its server's row.
type instanceReport struct {
	server string
	// seat is the seat whose child this is; empty for a shared server.
	seat string
	// hold is why it was not started (a credential), or nil.
	hold *upstream.Hold
	inst *upstream.Instance
	// fileErr is why its tools could not be filed (a name collision).
	fileErr  string
	unlisted []string
	// refusedNames are the names it listed that the hub does not offer
	// (outside the protocol's character set), written as ShowName writes
	// them.
	refusedNames []string
	// listed says its tools were filed, or refused, at least once: only
	// an instance that listed its tools can say a key names none of them.
	listed bool
}

func newStatusTable(node string) *statusTable {
	return &statusTable{node: node, insts: map[string]*instanceReport{}}
}

// held records an instance held back for a credential.
func (t *statusTable) held(key, server, seat string, hold *upstream.Hold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.insts[key] = &instanceReport{server: server, seat: seat, hold: hold}
}

// running records an instance just started.
func (t *statusTable) running(key, server, seat string, inst *upstream.Instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.insts[key] = &instanceReport{server: server, seat: seat, inst: inst}
}

// filed records how an instance's tools were filed; a report from an
// instance a revision has since replaced is dropped.
func (t *statusTable) filed(key string, inst *upstream.Instance, fileErr string, unlisted, refusedNames []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.insts[key]; r != nil && r.inst == inst {
		r.fileErr, r.unlisted, r.refusedNames, r.listed = fileErr, unlisted, refusedNames, true
	}
}

// drop forgets an instance the revision no longer declares.
func (t *statusTable) drop(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.insts, key)
}

// rows reports every server c declares, in declaration order.
func (t *statusTable) rows(c *config.Company, launchOf func(config.MCPServer) launch) []serverRow {
	declared := map[string]bool{}
	for _, w := range c.Instances() {
		declared[w.Server.Name] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var rows []serverRow
	for _, d := range c.MCPServers {
		row := serverRow{Name: d.Name, Shared: d.IsShared(), Launch: launchOf(d), UnlistedAnnotations: []string{}}
		var reports []*instanceReport
		for _, r := range t.insts {
			if r.server == d.Name {
				reports = append(reports, r)
			}
		}
		sort.Slice(reports, func(i, j int) bool { return reports[i].seat < reports[j].seat })
		cell := nodeCell{Node: t.node, State: rowNotReported}
		if len(reports) == 0 && !d.IsShared() {
			cell.State, cell.Reason = rowNotStarted, "no agent seat declares credentials for it under mcp_env"
			if declared[d.Name] {
				cell.Reason = "this node acts for none of the seats that declare credentials for it"
			}
			cell.Reasons = []cellReason{{State: cell.State, Reason: cell.Reason}}
		}
		var cells []nodeCell
		for _, r := range reports {
			cells = append(cells, r.cell())
		}
		row.UnlistedAnnotations = unlistedByAll(reports)
		row.RefusedToolNames = refusedByAny(reports)
		if len(cells) > 0 {
			cell = aggregate(t.node, cells)
		}
		row.Nodes = []nodeCell{cell}
		row.State, row.Reason = rollUp(row.Nodes)
		rows = append(rows, row)
	}
	return rows
}

// unlistedByAll is every tool_annotations key no instance that listed its
// tools lists (CAT-9): a per-role child rightly lists only what its seat's
// credentials reach, so a key one child answers is not reported.
func unlistedByAll(reports []*instanceReport) []string {
	count := map[string]int{}
	listed := 0
	for _, r := range reports {
		if !r.listed {
			continue
		}
		listed++
		for _, k := range r.unlisted {
			count[k]++
		}
	}
	out := []string{}
	for k, n := range count {
		if n == listed {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// refusedByAny is every tool name any instance listed that the hub does
// not offer, once, sorted.
func refusedByAny(reports []*instanceReport) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range reports {
		for _, n := range r.refusedNames {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// cell reads one instance's state.
func (s *instanceReport) cell() nodeCell {
	cell := nodeCell{Node: "this node", State: rowNotReported}
	who := ""
	if s.seat != "" {
		who = "seat " + s.seat + ": "
	}
	switch {
	case s.hold != nil && s.hold.State == upstream.Waiting:
		cell.State, cell.Reason = rowWaiting, who+s.hold.Sentence
	case s.hold != nil:
		cell.State, cell.Reason = rowFailing, who+s.hold.Sentence
	case s.fileErr != "":
		cell.State, cell.Reason = rowFailing, who+s.fileErr
	case s.inst != nil:
		st := s.inst.Status()
		cell.Tools = st.Tools
		switch st.State {
		case upstream.StateRunning:
			cell.State = rowRunning
		case upstream.StateStarting:
			cell.State, cell.Reason = rowNotStarted, who+"its first start is under way"
		case upstream.StateStopped:
			cell.State, cell.Reason = rowNotStarted, who+st.Cause
		default:
			// A server that is down counts as failed, with what took it
			// down, until it is back.
			cell.State, cell.Reason = rowFailing, who+st.Cause
			if !st.NextRestart.IsZero() {
				cell.NextRestart = st.NextRestart.UTC().Format("2006-01-02T15:04:05Z07:00")
			}
		}
	}
	if why := strings.TrimPrefix(cell.Reason, who); why != "" {
		r := cellReason{State: cell.State, Reason: why, NextRestart: cell.NextRestart}
		if s.seat != "" {
			r.Seats = []string{s.seat}
		}
		cell.Reasons = []cellReason{r}
	}
	return cell
}

// reasonRank orders a cell's reasons: what is broken, then what waits,
// then the rest.
func reasonRank(state string) int {
	switch state {
	case rowFailing:
		return 0
	case rowWaiting:
		return 1
	}
	return 2
}

// mergeReasons folds the instances' reasons into one list of distinct
// reasons, each with every seat that gives it, in rank order and, within a
// rank, in the order first given.
func mergeReasons(cells []nodeCell) []cellReason {
	var out []cellReason
	at := map[[2]string]int{}
	for _, c := range cells {
		for _, r := range c.Reasons {
			k := [2]string{r.State, r.Reason}
			if i, ok := at[k]; ok {
				out[i].Seats = append(out[i].Seats, r.Seats...)
				continue
			}
			at[k] = len(out)
			r.Seats = append([]string(nil), r.Seats...)
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return reasonRank(out[i].State) < reasonRank(out[j].State) })
	return out
}

// aggregate folds a node's instances of one server (a shared server has one,
// a per-role template one per seat) into the node's cell: the first failure
// explains a failing cell, the first wait a waiting one, and Reasons keeps
// every distinct reason with its seats.
func aggregate(node string, cells []nodeCell) nodeCell {
	out := nodeCell{Node: node, Instances: len(cells), Counts: map[string]int{}, Reasons: mergeReasons(cells)}
	var running, failing, waiting int
	for _, c := range cells {
		out.Counts[c.State]++
		out.Tools = max(out.Tools, c.Tools)
		switch c.State {
		case rowRunning:
			running++
		case rowFailing:
			failing++
			if failing == 1 {
				out.Reason, out.NextRestart = c.Reason, c.NextRestart
			}
		case rowWaiting:
			waiting++
		}
	}
	switch {
	case failing > 0 && running > 0:
		out.State = rowPartly
	case failing > 0:
		out.State = rowFailing
	case waiting > 0:
		out.State = rowWaiting
		for _, c := range cells {
			if c.State == rowWaiting {
				out.Reason = c.Reason
				break
			}
		}
	case running == len(cells):
		out.State = rowRunning
	default:
		out.State, out.Reason = cells[0].State, cells[0].Reason
	}
	return out
}

// rollUp reads a row's state from its cells: all running is Running, some
// failing is Partly failing, all failing is Failing, and a wait shows only
// where nothing else is wrong. The reason is the first failure's, else the
// first wait's. A node that runs no instance of the server (in a fleet, one
// holding none of a per-role server's seats) has no say while another
// node runs one.
func rollUp(cells []nodeCell) (string, string) {
	var active []nodeCell
	for _, c := range cells {
		if c.Instances > 0 {
			active = append(active, c)
		}
	}
	if len(active) > 0 {
		cells = active
	}
	var running, failing, waiting, reported int
	reason := ""
	for _, c := range cells {
		switch c.State {
		case rowRunning:
			running++
		case rowFailing, rowPartly:
			failing++
			if c.State == rowPartly {
				running++
			}
			if reason == "" {
				reason = c.Node + ": " + c.Reason
			}
		case rowWaiting:
			waiting++
		}
		if c.State != rowNotReported {
			reported++
		}
	}
	switch {
	case reported == 0:
		return rowNotReported, ""
	case failing > 0 && running > 0:
		return rowPartly, reason
	case failing > 0:
		return rowFailing, reason
	case waiting > 0:
		for _, c := range cells {
			if c.State == rowWaiting {
				return rowWaiting, c.Node + ": " + c.Reason
			}
		}
	case running == reported:
		return rowRunning, ""
	}
	return rowNotStarted, ""
}
