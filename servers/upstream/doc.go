// Package upstream runs the company's third-party MCP servers.
//
// An Instance is one running server: a stdio child in its own process group
// or a session with a remote URL, watched from start to stop and restarted on
// its Schedule. It owns its goroutines and its process tree; Close ends both.
//
// The rules an Instance follows (variable resolution, optional keys, the
// child's environment, the restart schedule) are pure and live in package
// launch; this package re-exports them under the same names.
package upstream
