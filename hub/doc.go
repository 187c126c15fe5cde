// Package hub is the central router of the tool plane. It keeps the company
// catalogue (every tool with its source, three-valued hints, where it
// delivers and who it is for), layers each seat's own registry over it,
// decides every call before any tool runs (unknown tool, tool not offered),
// routes the call to the server that owns it, sanitises what comes back,
// and serves the one operator catalogue over streamable HTTP (/operator/mcp)
// and as plain HTTP calls (/operator/act).
//
// The pieces are given what they need and report upward, never sideways:
// third-party supervision gets the catalogue, the environment, the leases,
// the log and a status table, and reports through events, which the
// operator surface implements; the operator surface gets the catalogue,
// the router, the tokens and a small control interface onto the hub.
//
// Ownership: a Hub owns its in-process server sessions, its supervised
// instances and every goroutine it starts; work it does in parallel runs
// on owned pools that it waits for (fanOut). Close stops them all and is
// safe to call twice.
package hub
