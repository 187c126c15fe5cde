// Package knowledge is the native knowledge base, served as a first-party
// MCP server: the team's pages (procedures, decisions, notes) in containers
// — each unit's space — with a history, comments, watchers and the links
// between pages. The hub mounts it only when the company runs the native
// knowledge base (CAT-4); it imports the servers kit and authority, never
// the hub.
//
// Every write goes through the servers kit's write path (servers.Writes):
// a tool decides a payload from the caller's arguments and the projection
// as it reads it now, and the kit appends it as one operation, waits for
// this node's projection to apply it and says the outcome (WR-1..8). The
// projectors in this package are the only code that changes pages, so
// every node replaying the same log holds the same knowledge base; each
// rule a tool checks before it writes (a title free in its container, a
// parent in the same container and not in the trash, a version still
// current) is one function the projector asks again, in log order.
//
// Files hold a tool group each: pages (write_page, save_page), reads
// (get_page, list_pages), comments (comment_on_page); links.go reads the
// links a body makes, and keys.go spells the projection's layout (all under
// "kb/").
package knowledge
