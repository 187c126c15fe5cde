// Package tracker is the native work tracker, served as a first-party MCP
// server. The hub mounts it only when the company runs the native tracker
// (CAT-4); it imports the servers kit, authority and the state node, never the
// hub.
//
// Every write goes through the servers kit's write path (servers.Writes): a
// tool decides a payload from the caller's arguments and the projection as
// it reads it now, and the kit appends it as one operation, waits for this
// node's projection to apply it, and says the outcome. The projectors
// in this package are the only code that changes tracker data, so every node
// replaying the same log holds the same board. That is also why a projector
// re-checks what a tool already checked (a version, a budget, a key still
// free): the tool's check saves a write, the projector's is the one that
// decides, in log order. Each such rule is one function both call
// (rules.go, and the checks beside each tool group).
//
// Files hold a tool group each — its tools, payloads and projectors: items
// (create, get, list), update (with links and the checklist), comments,
// merge and move, projects, catalogue, activity, files and search.
//
// Layout in the projection (all under "trk/"): project rows, one row per work
// item plus a compact summary and list indexes, the search postings, the
// activity feed, project files, wake events for mentions and the alias rows
// that keep moved keys resolving.
package tracker
