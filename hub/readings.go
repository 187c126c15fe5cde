package hub

// What a node's metrics read from the hub at each scrape. They are read,
// not pushed: a scrape sees the state as it is, and the hub keeps no
// counter it does not need itself.

// ServerState is one configured MCP server's row, as GET /mcp-servers
// reads it, for metrics: its state (Running, Failing, ...) and the most
// tools any of its instances listed.
type ServerState struct {
	Server string
	State  string
	Tools  int
}

// ServerStates reads every server the revision in force declares.
func (h *Hub) ServerStates() []ServerState {
	rows := h.serverRows()
	out := make([]ServerState, 0, len(rows))
	for _, r := range rows {
		s := ServerState{Server: r.Name, State: r.State}
		for _, c := range r.Nodes {
			s.Tools = max(s.Tools, c.Tools)
		}
		out = append(out, s)
	}
	return out
}

// ServerStateNames are the states a server's row can read, in the order a
// reader scans them.
var ServerStateNames = []string{rowRunning, rowPartly, rowFailing, rowWaiting, rowNotStarted, rowNotReported}

// OperatorSessions counts the open 2025 operator sessions (2026-07-28
// clients hold none).
func (h *Hub) OperatorSessions() int {
	n := 0
	for range h.operator.server.Sessions() {
		n++
	}
	return n
}
