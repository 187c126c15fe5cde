// Package hub is the central router of the tool plane. It keeps the company
// catalogue (every tool with its source, three-valued hints and where it
// delivers), layers each seat's own registry over it, decides every call
// before any tool runs (unknown tool, tool not offered), routes the call to
// the server that owns it, sanitises what comes back, and serves the one
// operator catalogue over streamable HTTP.
//
// Ownership: a Hub owns its in-process server sessions and every goroutine
// it starts; Close stops them all and is safe to call twice.
package hub
